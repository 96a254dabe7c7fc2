package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"
)

// Workspace is the ARM workspace resource. Cumulus keeps the fields that
// matter to it and echoes the common envelope.
type Workspace struct {
	ID         string              `json:"id"`
	Name       string              `json:"name"`
	Type       string              `json:"type"`
	Location   string              `json:"location"`
	Tags       map[string]string   `json:"tags,omitempty"`
	Identity   *Identity           `json:"identity,omitempty"`
	SKU        *SKU                `json:"sku,omitempty"`
	SystemData *SystemData         `json:"systemData,omitempty"`
	Properties WorkspaceProperties `json:"properties"`
}

// WorkspaceProperties is the workspace's properties block.
type WorkspaceProperties struct {
	FriendlyName      string     `json:"friendlyName,omitempty"`
	Description       string     `json:"description,omitempty"`
	ProvisioningState string     `json:"provisioningState,omitempty"`
	WorkspaceID       string     `json:"workspaceId,omitempty"`
	CreationTime      *time.Time `json:"creationTime,omitempty"`
	// Read-only, filled when the workspace is answered: where the SDKs
	// find the services they read job logs and outputs from, and the
	// storage account of the workspace's blob store.
	DiscoveryURL   string `json:"discoveryUrl,omitempty"`
	StorageAccount string `json:"storageAccount,omitempty"`
}

// WorkspaceUID is the workspace's unique id (workspaceId), or for a
// workspace stored before it had one, its ARM id.
func (w Workspace) WorkspaceUID() string {
	if w.Properties.WorkspaceID != "" {
		return w.Properties.WorkspaceID
	}
	return w.ID
}

// PrepareWorkspace validates a PUT body and fills what the server owns.
func PrepareWorkspace(w *Workspace, s Scope, defaultLocation string) error {
	var v Validation
	if err := CheckWorkspaceName(s.Workspace); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if w.Location == "" {
		w.Location = defaultLocation
	} else if err := CheckSegment("location", w.Location); err != nil {
		v.Add(CodeValidationError, "location", "%s", err)
	}
	checkTags(&v, w.Tags)
	if w.Identity != nil {
		checkIdentity(&v, w.Identity)
	}
	if err := v.Err(); err != nil {
		return err
	}
	w.ID = s.WorkspaceID()
	w.Name = s.Workspace
	w.Type = TypeWorkspace
	w.Properties.ProvisioningState = "Succeeded"
	w.Properties.DiscoveryURL, w.Properties.StorageAccount = "", "" // read-only
	return nil
}

// ErrWorkspaceHasComputes is returned when deleting a workspace that
// still holds computes without forcing.
func ErrWorkspaceHasComputes(ws string, n int) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict,
		Message: "workspace " + ws + " still holds " + itoa(n) + " compute(s); delete them first or pass forceToPurge=true"}
}

// WorkspaceUpdate is the body of a workspace PATCH (Azure's
// WorkspaceUpdateParameters): what is present replaces what is stored.
// Properties Cumulus has no behaviour for are refused when given a value;
// SDKs that send them as null are accepted.
type WorkspaceUpdate struct {
	Tags       map[string]string          `json:"tags,omitempty"`
	Identity   *Identity                  `json:"identity,omitempty"`
	SKU        *SKU                       `json:"sku,omitempty"`
	Properties map[string]json.RawMessage `json:"properties,omitempty"`
}

// ApplyWorkspaceUpdate validates u and applies it to w; on an error w is
// unchanged.
func ApplyWorkspaceUpdate(w *Workspace, u WorkspaceUpdate) error {
	var v Validation
	props := w.Properties
	if u.Tags != nil {
		checkTags(&v, u.Tags)
	}
	if u.Identity != nil {
		checkIdentity(&v, u.Identity)
	}
	keys := make([]string, 0, len(u.Properties))
	for k := range u.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := u.Properties[k]
		if string(raw) == "null" {
			continue
		}
		var dst *string
		switch k {
		case "discoveryUrl", "storageAccount", "workspaceId", "provisioningState", "creationTime":
			continue // read-only: an SDK sends back what it read
		case "friendlyName":
			dst = &props.FriendlyName
		case "description":
			dst = &props.Description
		default:
			v.Add(CodeValidationError, "properties."+k, "%s cannot be updated here: a workspace update changes tags, identity, sku, friendlyName and description", k)
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			v.Add(CodeValidationError, "properties."+k, "%s must be a string", k)
			continue
		}
		*dst = s
	}
	if err := v.Err(); err != nil {
		return err
	}
	w.Properties = props
	if u.Tags != nil {
		w.Tags = u.Tags
	}
	if u.Identity != nil {
		w.Identity = u.Identity
	}
	if u.SKU != nil {
		w.SKU = u.SKU
	}
	return nil
}
