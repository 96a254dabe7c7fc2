package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// User-assigned identities: a minimal Microsoft.ManagedIdentity resource
// under a resource group, with the principal and client ids that computes
// referencing it get tokens for.

// KindUserIdentity holds user-assigned identities; parent is the group id.
const KindUserIdentity = "useridentity"

const userIdentities = "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities"

func (s *Server) userIdentityRoutes() {
	r := &s.router
	r.handle("PUT", userIdentities+"/{name}", s.putUserIdentity)
	r.handle("GET", userIdentities+"/{name}", s.getUserIdentity)
	r.handle("DELETE", userIdentities+"/{name}", s.deleteUserIdentity)
	r.handle("GET", userIdentities, s.listUserIdentities)
}

func (s *Server) putUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var u api.UserIdentity
	if err := decode(r, &u); err != nil {
		return err
	}
	if err := api.CheckWorkspaceName(name); err != nil {
		return api.BadRequest(api.CodeInvalidName, "identity name: %s", err)
	}
	id := sc.UserIdentityID(name)
	u.ID, u.Name, u.Type = id, name, api.TypeUserIdentity
	if u.Location == "" {
		u.Location = s.cfg.Defaults.Location
	}
	// The same derivation computes use when they reference the identity.
	u.Properties = api.UserIdentityProperties{PrincipalID: stableUUID("principal/" + store.Key(id)), ClientID: stableUUID("client/" + store.Key(id)),
		TenantID: stableUUID("tenant/" + sc.Subscription)}
	status := http.StatusOK
	err := s.tx(r, func(q store.Querier) error {
		if _, err := store.Get[api.UserIdentity](r.Context(), q, KindUserIdentity, sc.GroupID(), name); isNotFound(err) {
			status = http.StatusCreated
		}
		_, err := store.Put(r.Context(), q, KindUserIdentity, sc.GroupID(), name, u, 0, s.clock.Now().UTC())
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, status, u)
	return nil
}

func (s *Server) getUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	d, err := store.Get[api.UserIdentity](r.Context(), s.db.Q(), KindUserIdentity, sc.GroupID(), p["name"])
	if isNotFound(err) {
		return api.NotFound("user-assigned identity %s was not found in resource group %s", p["name"], sc.ResourceGroup)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.Value)
	return nil
}

func (s *Server) listUserIdentities(w http.ResponseWriter, r *http.Request, p params) error {
	return listPage[api.UserIdentity](s, w, r, KindUserIdentity, scopeOf(p).GroupID(), true, func(u api.UserIdentity) any { return u })
}

func (s *Server) deleteUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	err := s.tx(r, func(q store.Querier) error {
		return store.Delete(r.Context(), q, KindUserIdentity, sc.GroupID(), p["name"], 0)
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// checkAssign checks the user-assigned identities that id attaches and
// old (the resource's identity before this write) did not: the caller
// must be allowed rbac.AssignIdentity at the identity's own id (Owner or
// Contributor over it, or ManagedIdentityOperator; a role in the
// workspace alone does not cover an identity of the resource group), and
// the identity must exist. Permission is checked first, so that a caller
// without it learns nothing of which identities exist.
func (s *Server) checkAssign(r *http.Request, q store.Querier, id, old *api.Identity) error {
	if id == nil || !strings.Contains(id.Type, api.IdentityUser) {
		return nil
	}
	rids := make([]string, 0, len(id.UserAssignedIdentities))
	for rid := range id.UserAssignedIdentities {
		if !hasUserIdentity(old, rid) {
			rids = append(rids, rid)
		}
	}
	sort.Strings(rids)
	for _, rid := range rids {
		if err := s.allowOperation(r, rid, rbac.AssignIdentity, rbac.AssignIdentityOperation); err != nil {
			return err
		}
		if err := s.userIdentityExists(r, q, rid); err != nil {
			return err
		}
	}
	return nil
}

// hasUserIdentity reports whether id already attaches the identity rid.
func hasUserIdentity(id *api.Identity, rid string) bool {
	if id == nil || !strings.Contains(id.Type, api.IdentityUser) {
		return false
	}
	for k := range id.UserAssignedIdentities {
		if strings.EqualFold(k, rid) {
			return true
		}
	}
	return false
}

// userIdentityExists refuses an identity id that names no stored
// user-assigned identity.
func (s *Server) userIdentityExists(r *http.Request, q store.Querier, rid string) error {
	p := strings.Split(strings.Trim(rid, "/"), "/")
	missing := &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidationError, Target: "identity.userAssignedIdentities",
		Message: "user-assigned identity " + rid + " does not exist; create it first ('cumulus identity create -n NAME', or PUT …/providers/Microsoft.ManagedIdentity/userAssignedIdentities/NAME)"}
	if len(p) != 8 {
		return missing
	}
	sc := api.Scope{Subscription: p[1], ResourceGroup: p[3]}
	_, err := store.Get[api.UserIdentity](r.Context(), q, KindUserIdentity, sc.GroupID(), p[7])
	if isNotFound(err) {
		return missing
	}
	return err
}
