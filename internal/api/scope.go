package api

import (
	"fmt"
	"strings"
)

// Provider is the ARM resource provider namespace Cumulus implements.
const Provider = "Microsoft.MachineLearningServices"

// Resource types as ARM writes them in the "type" field.
const (
	TypeWorkspace = Provider + "/workspaces"
	TypeCompute   = Provider + "/workspaces/computes"
	TypeJob       = Provider + "/workspaces/jobs"
)

// Scope names a workspace: the parent of computes and jobs.
type Scope struct {
	Subscription  string
	ResourceGroup string
	Workspace     string
}

// GroupID is the ARM id of the resource group.
func (s Scope) GroupID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", s.Subscription, s.ResourceGroup)
}

// WorkspaceID is the ARM id of the workspace.
func (s Scope) WorkspaceID() string {
	return fmt.Sprintf("%s/providers/%s/workspaces/%s", s.GroupID(), Provider, s.Workspace)
}

// ComputeID is the ARM id of a compute in the workspace.
func (s Scope) ComputeID(name string) string {
	return s.WorkspaceID() + "/computes/" + name
}

// JobID is the ARM id of a job in the workspace.
func (s Scope) JobID(name string) string {
	return s.WorkspaceID() + "/jobs/" + name
}

// ParseComputeID splits a compute's ARM id. It also accepts a bare compute
// name (resolved in def's workspace) and the CLI's "azureml:<name>" form.
func ParseComputeID(id string, def Scope) (Scope, string, error) {
	id = strings.TrimPrefix(id, "azureml:")
	if !strings.Contains(id, "/") {
		if id == "" {
			return Scope{}, "", fmt.Errorf("compute id is empty")
		}
		return def, id, nil
	}
	sc, name, ok := parseChildID(id, "computes")
	if !ok {
		return Scope{}, "", fmt.Errorf("%q is not a compute id of the form /subscriptions/S/resourceGroups/G/providers/%s/workspaces/W/computes/NAME", id, Provider)
	}
	return sc, name, nil
}

// ParseJobID splits a job's ARM id.
func ParseJobID(id string) (Scope, string, error) {
	sc, name, ok := parseChildID(id, "jobs")
	if !ok {
		return Scope{}, "", fmt.Errorf("%q is not a job id of the form /subscriptions/S/resourceGroups/G/providers/%s/workspaces/W/jobs/NAME", id, Provider)
	}
	return sc, name, nil
}

// parseChildID splits the ARM id of a workspace's child of a kind
// (computes, jobs).
func parseChildID(id, kind string) (Scope, string, bool) {
	p := strings.Split(strings.Trim(id, "/"), "/")
	if len(p) != 10 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[4], "providers") || !strings.EqualFold(p[5], Provider) ||
		!strings.EqualFold(p[6], "workspaces") || !strings.EqualFold(p[8], kind) {
		return Scope{}, "", false
	}
	return Scope{Subscription: p[1], ResourceGroup: p[3], Workspace: p[7]}, p[9], true
}

// ParseWorkspaceID splits a workspace's ARM id.
func ParseWorkspaceID(id string) (Scope, error) {
	p := strings.Split(strings.Trim(id, "/"), "/")
	if len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[4], "providers") || !strings.EqualFold(p[5], Provider) || !strings.EqualFold(p[6], "workspaces") {
		return Scope{}, fmt.Errorf("%q is not a workspace id of the form /subscriptions/S/resourceGroups/G/providers/%s/workspaces/W", id, Provider)
	}
	return Scope{Subscription: p[1], ResourceGroup: p[3], Workspace: p[7]}, nil
}
