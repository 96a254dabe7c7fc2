package api

import "time"

// SystemData is ARM's record of who created and last changed a resource.
type SystemData struct {
	CreatedBy          string     `json:"createdBy,omitempty"`
	CreatedByType      string     `json:"createdByType,omitempty"`
	CreatedAt          *time.Time `json:"createdAt,omitempty"`
	LastModifiedBy     string     `json:"lastModifiedBy,omitempty"`
	LastModifiedByType string     `json:"lastModifiedByType,omitempty"`
	LastModifiedAt     *time.Time `json:"lastModifiedAt,omitempty"`
}

// Touch returns sd (nil: none yet) as changed by who at now: created then
// when it had no creation, last modified then in any case.
func Touch(sd *SystemData, who string, now time.Time) *SystemData {
	out := &SystemData{}
	if sd != nil {
		*out = *sd
	}
	if out.CreatedAt == nil {
		out.CreatedBy, out.CreatedByType, out.CreatedAt = who, "User", &now
	}
	out.LastModifiedBy, out.LastModifiedByType, out.LastModifiedAt = who, "User", &now
	return out
}

// Identity is a managed identity block (ManagedServiceIdentity).
type Identity struct {
	Type                   string                           `json:"type"`
	PrincipalID            string                           `json:"principalId,omitempty"`
	TenantID               string                           `json:"tenantId,omitempty"`
	UserAssignedIdentities map[string]*UserAssignedIdentity `json:"userAssignedIdentities,omitempty"`
}

// UserAssignedIdentity is one entry of Identity.UserAssignedIdentities.
type UserAssignedIdentity struct {
	PrincipalID string `json:"principalId,omitempty"`
	ClientID    string `json:"clientId,omitempty"`
}

// Identity types ARM accepts.
const (
	IdentityNone           = "None"
	IdentitySystem         = "SystemAssigned"
	IdentityUser           = "UserAssigned"
	IdentitySystemAndUser  = "SystemAssigned,UserAssigned"
	identityTypesForErrors = "None, SystemAssigned, UserAssigned, SystemAssigned,UserAssigned"
)

// SKU is ARM's sku block; computes accept and echo it.
type SKU struct {
	Name     string `json:"name,omitempty"`
	Tier     string `json:"tier,omitempty"`
	Size     string `json:"size,omitempty"`
	Family   string `json:"family,omitempty"`
	Capacity *int32 `json:"capacity,omitempty"`
}

// OperationStatus is the body of an Azure-AsyncOperation URL.
type OperationStatus struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	StartTime *time.Time `json:"startTime,omitempty"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	Error     *Error     `json:"error,omitempty"`
}

// Operation statuses.
const (
	OpInProgress = "InProgress"
	OpSucceeded  = "Succeeded"
	OpFailed     = "Failed"
	OpCanceled   = "Canceled"
)

// Page is a list response with ARM's nextLink paging.
type Page[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}
