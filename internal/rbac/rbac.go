// Package rbac decides who may do what where: built-in roles, role
// assignments at a scope (an ARM id prefix), and the action a request
// needs. It is pure: callers bring the assignments.
package rbac

import (
	"strings"
)

// Actions a request can need.
type Action string

const (
	Read    Action = "read"    // GET, list, listNodes
	Write   Action = "write"   // create/update, cancel, join tokens, uploads
	Delete  Action = "delete"  // DELETE
	Scale   Action = "scale"   // PATCH of a compute's scale settings (a workspace PATCH is a Write)
	Evict   Action = "evict"   // simulateEviction
	Secrets Action = "secrets" // listKeys: admin credentials
	Access  Action = "access"  // principals, tokens, role assignments, audit log
	// AssignIdentity is attaching a user-assigned identity to a compute
	// or workspace; it is checked at the identity's id, not the
	// compute's (Azure's Microsoft.ManagedIdentity/userAssignedIdentities/
	// assign/action, which its Managed Identity Operator role grants).
	AssignIdentity Action = "assignIdentity"
	// Metrics is reading the Prometheus exposition (GET /metrics). It
	// has no resource: every role that reads holds it at whatever scope
	// (AllowedAnywhere), so any signed-in reader may scrape.
	Metrics Action = "metrics"
	// ManageLocks is creating, changing and deleting management locks
	// (Microsoft.Authorization/locks/write and /delete): Owner alone, as
	// in Azure, where Contributor cannot remove the lock that stops it.
	// Reading locks is Read.
	ManageLocks Action = "manageLocks"
)

// AssignIdentityOperation names AssignIdentity in ARM's style, for the
// audit log and refusals.
const AssignIdentityOperation = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"

// Built-in roles.
const (
	Owner           = "Owner"
	Contributor     = "Contributor"
	Reader          = "Reader"
	ComputeOperator = "ComputeOperator"
	// ManagedIdentityOperator may only attach identities: assigned at an
	// identity's id (or its resource group) it lets a workspace's
	// Contributor attach that identity to the workspace's computes.
	ManagedIdentityOperator = "ManagedIdentityOperator"
)

var roles = map[string][]Action{
	Owner:                   {Read, Write, Delete, Scale, Evict, Secrets, Access, AssignIdentity, Metrics, ManageLocks},
	Contributor:             {Read, Write, Delete, Scale, Evict, Secrets, AssignIdentity, Metrics},
	Reader:                  {Read, Metrics},
	ComputeOperator:         {Read, Scale, Evict, Metrics},
	ManagedIdentityOperator: {AssignIdentity},
}

// Roles lists the built-in roles.
func Roles() []string {
	return []string{Owner, Contributor, Reader, ComputeOperator, ManagedIdentityOperator}
}

// CanonicalRole returns the built-in role's spelling, or "".
func CanonicalRole(name string) string {
	for _, r := range Roles() {
		if strings.EqualFold(strings.ReplaceAll(name, " ", ""), r) {
			return r
		}
	}
	return ""
}

// Assignment is a role at a scope.
type Assignment struct {
	Role  string
	Scope string // "/" or an ARM id such as /subscriptions/S/resourceGroups/G
}

// Covers reports whether scope contains resource: equal, or a parent at a
// segment boundary. Case-insensitive, as ARM ids are.
func Covers(scope, resource string) bool {
	s := strings.ToLower(strings.TrimSuffix(scope, "/"))
	r := strings.ToLower(resource)
	return s == "" || r == s || strings.HasPrefix(r, s+"/")
}

// Allowed reports whether any assignment lets its holder do action on resource.
func Allowed(as []Assignment, resource string, action Action) bool {
	for _, a := range as {
		if !Covers(a.Scope, resource) {
			continue
		}
		for _, x := range roles[a.Role] {
			if x == action {
				return true
			}
		}
	}
	return false
}

// AllowedAnywhere reports whether any assignment, at any scope, lets its
// holder do action: for actions on the service rather than a resource.
func AllowedAnywhere(as []Assignment, action Action) bool {
	for _, a := range as {
		for _, x := range roles[a.Role] {
			if x == action {
				return true
			}
		}
	}
	return false
}

// ActionOf is what an ARM request needs: by method, and for POST by the
// action named in the last path segment.
func ActionOf(method, path string) Action {
	last := path[strings.LastIndex(strings.TrimSuffix(path, "/"), "/")+1:]
	if method != "GET" && method != "HEAD" && IsLockPath(path) {
		return ManageLocks
	}
	switch method {
	case "GET", "HEAD":
		return Read
	case "DELETE":
		return Delete
	case "PATCH":
		if strings.Contains(strings.ToLower(path), "/computes/") {
			return Scale
		}
		return Write // a workspace's tags, identity, description
	case "POST":
		switch strings.ToLower(last) {
		case "listnodes", "rundata":
			return Read
		case "listsecrets":
			// A datastore's SAS: a reader gets a read-only one (the
			// handler signs what the caller's roles allow).
			return Read
		case "listkeys":
			return Secrets
		case "simulateeviction":
			return Evict
		}
	}
	return Write
}

// IsLockPath reports whether path names management locks: it goes on
// past a resource with /providers/Microsoft.Authorization/locks.
func IsLockPath(path string) bool {
	return strings.Contains(strings.ToLower(path), "/providers/microsoft.authorization/locks")
}

// OperationName names a request in ARM's style for the audit log:
// Microsoft.MachineLearningServices/workspaces/computes/write,
// …/computes/listKeys/action, …/delete.
func OperationName(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	provider := ""
	var types []string
	action := ""
	for i := 0; i < len(segs); i++ {
		if strings.EqualFold(segs[i], "providers") && i+1 < len(segs) {
			provider = segs[i+1]
			types = types[:0]
			i++
			continue
		}
		if provider == "" {
			continue
		}
		if i+1 < len(segs) {
			types = append(types, segs[i])
			i++ // skip the name
		} else {
			// A trailing segment after a name: a POST action, or a
			// collection (list).
			if method == "POST" {
				action = segs[i]
			} else {
				types = append(types, segs[i])
			}
		}
	}
	if provider == "" {
		provider = "Cumulus"
		types = segs
	}
	verb := map[string]string{"GET": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete", "POST": "action"}[method]
	name := provider + "/" + strings.Join(types, "/")
	if action != "" {
		return name + "/" + action + "/action"
	}
	return name + "/" + verb
}
