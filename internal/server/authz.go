package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// authorize checks that the request's principal holds a role that allows
// what the request does on the resource it names. Location-level reads
// (VM sizes, usages, quotas, operation statuses) are open to every
// signed-in principal.
func (s *Server) authorize(r *http.Request) error {
	action := rbac.ActionOf(r.Method, r.URL.Path)
	if action == rbac.Read && strings.Contains(strings.ToLower(r.URL.Path), "/providers/microsoft.machinelearningservices/locations/") {
		return nil
	}
	return s.allow(r, r.URL.Path, action)
}

// allow checks one action on one resource for the request's principal.
func (s *Server) allow(r *http.Request, resource string, action rbac.Action) error {
	return s.allowOperation(r, resource, action, rbac.OperationName(r.Method, r.URL.Path))
}

// allowOperation is allow with the operation a refusal names.
func (s *Server) allowOperation(r *http.Request, resource string, action rbac.Action, operation string) error {
	who := principal(r)
	as, err := store.RoleAssignments(r.Context(), s.db.Q(), who)
	if err != nil {
		return err
	}
	var roles []rbac.Assignment
	for _, a := range as {
		roles = append(roles, rbac.Assignment{Role: a.Role, Scope: a.Scope})
	}
	if rbac.Allowed(roles, resource, action) {
		return nil
	}
	return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Message: "principal '" + who + "' does not have authorization to perform action '" + operation +
			"' over scope '" + resource + "' (it needs a role that allows " + string(action) + "; see 'cumulus auth role list')"}
}

// CanRead says whether a principal may read a resource, for parts of
// Cumulus outside the API (the studio's chart history).
func CanRead(db *store.DB) func(ctx context.Context, principal, resource string) bool {
	return func(ctx context.Context, principal, resource string) bool {
		as, err := store.RoleAssignments(ctx, db.Q(), principal)
		if err != nil {
			return false
		}
		var roles []rbac.Assignment
		for _, a := range as {
			roles = append(roles, rbac.Assignment{Role: a.Role, Scope: a.Scope})
		}
		return rbac.Allowed(roles, resource, rbac.Read)
	}
}
