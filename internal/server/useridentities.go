package server

import (
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// User-assigned identities: a minimal Microsoft.ManagedIdentity resource
// under a resource group, with the principal and client ids that computes
// referencing it get tokens for.

// KindUserIdentity holds user-assigned identities; parent is the group id.
const KindUserIdentity = "useridentity"

const userIdentities = "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities"

// UserIdentity is a user-assigned identity resource.
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

func (s *Server) userIdentityRoutes() {
	r := &s.router
	r.handle("PUT", userIdentities+"/{name}", s.putUserIdentity)
	r.handle("GET", userIdentities+"/{name}", s.getUserIdentity)
	r.handle("DELETE", userIdentities+"/{name}", s.deleteUserIdentity)
	r.handle("GET", userIdentities, s.listUserIdentities)
}

func userIdentityID(sc api.Scope, name string) string {
	return sc.GroupID() + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/" + name
}

func (s *Server) putUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var u UserIdentity
	if err := decode(r, &u); err != nil {
		return err
	}
	if err := api.CheckWorkspaceName(name); err != nil {
		return api.BadRequest(api.CodeInvalidName, "identity name: %s", err)
	}
	id := userIdentityID(sc, name)
	u.ID, u.Name, u.Type = id, name, "Microsoft.ManagedIdentity/userAssignedIdentities"
	if u.Location == "" {
		u.Location = s.cfg.Defaults.Location
	}
	// The same derivation computes use when they reference the identity.
	u.Properties = UserIdentityProperties{PrincipalID: stableUUID("principal/" + store.Key(id)), ClientID: stableUUID("client/" + store.Key(id)),
		TenantID: stableUUID("tenant/" + sc.Subscription)}
	status := http.StatusOK
	if _, err := store.Get[UserIdentity](r.Context(), s.db.Q(), KindUserIdentity, sc.GroupID(), name); isNotFound(err) {
		status = http.StatusCreated
	}
	if _, err := store.Put(r.Context(), s.db.W(), KindUserIdentity, sc.GroupID(), name, u, 0, s.clock.Now().UTC()); err != nil {
		return err
	}
	writeJSON(w, status, u)
	return nil
}

func (s *Server) getUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	d, err := store.Get[UserIdentity](r.Context(), s.db.Q(), KindUserIdentity, sc.GroupID(), p["name"])
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
	return listPage[UserIdentity](s, w, r, KindUserIdentity, scopeOf(p).GroupID(), true, func(u UserIdentity) any { return u })
}

func (s *Server) deleteUserIdentity(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	err := store.Delete(r.Context(), s.db.W(), KindUserIdentity, sc.GroupID(), p["name"], 0)
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
