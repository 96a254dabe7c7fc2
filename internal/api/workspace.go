package api

import (
	"net/http"
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
	return nil
}

// ErrWorkspaceHasComputes is returned when deleting a workspace that
// still holds computes without forcing.
func ErrWorkspaceHasComputes(ws string, n int) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict,
		Message: "workspace " + ws + " still holds " + itoa(n) + " compute(s); delete them first or pass forceToPurge=true"}
}
