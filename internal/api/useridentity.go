package api

// ManagedIdentityProvider is the ARM namespace of user-assigned identities.
const ManagedIdentityProvider = "Microsoft.ManagedIdentity"

// TypeUserIdentity is a user-assigned identity's ARM type.
const TypeUserIdentity = ManagedIdentityProvider + "/userAssignedIdentities"

// ManagedIdentityAPIVersion is the Microsoft.ManagedIdentity api-version
// the CLI speaks (az identity's).
const ManagedIdentityAPIVersion = "2023-01-31"

// UserIdentity is a user-assigned identity
// (Microsoft.ManagedIdentity/userAssignedIdentities): computes attach it
// by its id, and their jobs get tokens as its principal.
type UserIdentity struct {
	ID         string                 `json:"id"`
	Name       string                 `json:"name"`
	Type       string                 `json:"type"`
	Location   string                 `json:"location,omitempty"`
	Tags       map[string]string      `json:"tags,omitempty"`
	Properties UserIdentityProperties `json:"properties"`
}

// UserIdentityProperties are the identity's ids.
type UserIdentityProperties struct {
	PrincipalID string `json:"principalId"`
	ClientID    string `json:"clientId"`
	TenantID    string `json:"tenantId"`
}

// UserIdentityID is the ARM id of a user-assigned identity of the group.
func (s Scope) UserIdentityID(name string) string {
	return s.GroupID() + "/providers/" + TypeUserIdentity + "/" + name
}
