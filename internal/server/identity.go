package server

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/identity"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) identityRoutes() {
	a := &s.agents
	a.handle("GET", identity.DiscoveryPath, s.oidcDiscovery)
	a.handle("GET", identity.JWKSPath, s.jwks)
	a.handle("POST", agentapi.Prefix+"/jobs/{uid}/token", s.agentToken)
	s.userIdentityRoutes()
	s.accessRoutes()
}

func (s *Server) oidcDiscovery(w http.ResponseWriter, r *http.Request, _ params) error {
	if s.identity == nil {
		return api.NotFound("this server issues no identity tokens")
	}
	writeJSON(w, http.StatusOK, s.identity.Discovery())
	return nil
}

func (s *Server) jwks(w http.ResponseWriter, r *http.Request, _ params) error {
	if s.identity == nil {
		return api.NotFound("this server issues no identity tokens")
	}
	writeJSON(w, http.StatusOK, s.identity.JWKS())
	return nil
}

// clusterIdentity is one identity a compute has: system-assigned or one
// of its user-assigned identities.
type clusterIdentity struct {
	principal, client, tenant, resourceID string
}

// identitiesOf lists a compute's identities, system-assigned first.
func identitiesOf(c api.Compute) []clusterIdentity {
	id := c.Identity
	if id == nil {
		return nil
	}
	var out []clusterIdentity
	if strings.Contains(id.Type, api.IdentitySystem) && id.PrincipalID != "" {
		out = append(out, clusterIdentity{id.PrincipalID, SystemClientID(id.PrincipalID), id.TenantID, c.ID})
	}
	rids := make([]string, 0, len(id.UserAssignedIdentities))
	for rid := range id.UserAssignedIdentities {
		rids = append(rids, rid)
	}
	sort.Strings(rids)
	for _, rid := range rids {
		if u := id.UserAssignedIdentities[rid]; u != nil && strings.Contains(id.Type, api.IdentityUser) {
			out = append(out, clusterIdentity{u.PrincipalID, u.ClientID, id.TenantID, rid})
		}
	}
	return out
}

// SystemClientID is the client id of a system-assigned identity.
func SystemClientID(principal string) string { return stableUUID("client/system/" + principal) }

// computeOfJob reads the compute a job runs on.
func (s *Server) computeOfJob(ctx context.Context, j store.Job) (api.Compute, error) {
	sc, name, err := api.ParseComputeID(j.Compute, api.Scope{})
	if err != nil {
		return api.Compute{}, err
	}
	d, err := store.Get[api.Compute](ctx, s.db.Q(), store.KindCompute, sc.WorkspaceID(), name)
	return d.Value, err
}

// agentToken signs a token for a running job: only for an identity of the
// cluster the job runs on, only while the job runs on the asking node.
func (s *Server) agentToken(w http.ResponseWriter, r *http.Request, p params) error {
	node, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	if s.identity == nil {
		return api.NotFound("this server issues no identity tokens")
	}
	var req agentapi.TokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if st := j.Doc.Properties.Status; api.JobTerminal(st) || node.JobID != j.UID {
		return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "job " + j.Doc.Name + " is not running on this node"}
	}
	comp, err := s.computeOfJob(r.Context(), j)
	if err != nil {
		return err
	}
	ids := identitiesOf(comp)
	var chosen *clusterIdentity
	for i := range ids {
		if req.ClientID == "" || strings.EqualFold(ids[i].client, req.ClientID) || strings.EqualFold(ids[i].resourceID, req.ClientID) {
			chosen = &ids[i]
			break
		}
	}
	if chosen == nil {
		msg := "compute " + comp.Name + " has no managed identity"
		if req.ClientID != "" {
			msg = "client id " + req.ClientID + " is not an identity of compute " + comp.Name
		}
		return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: msg}
	}
	if chosen.resourceID != comp.ID {
		// A user-assigned identity: only while it exists (deleting it
		// ends the tokens of every compute it is attached to).
		var missing *api.Error
		if err := s.userIdentityExists(r, s.db.Q(), chosen.resourceID); errors.As(err, &missing) {
			return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "user-assigned identity " + chosen.resourceID + " no longer exists"}
		} else if err != nil {
			return err
		}
	}
	resource := strings.TrimSuffix(strings.TrimSpace(req.Resource), "/.default")
	if resource == "" {
		return api.BadRequest(api.CodeBadRequest, "resource is required")
	}
	tok, err := s.identity.Issue(identity.Claims{Subject: chosen.principal, Audience: resource, ClientID: chosen.client,
		TenantID: chosen.tenant, ResourceID: chosen.resourceID}, s.clock.Now())
	if err != nil {
		return err
	}
	// The token itself is never logged.
	s.log.Info("identity token issued", "job", j.Doc.Name, "node", node.ID, "client_id", chosen.client, "audience", resource)
	writeJSON(w, http.StatusOK, agentapi.TokenResponse{AccessToken: tok.Value, ExpiresOn: strconv.FormatInt(tok.Expires.Unix(), 10),
		Resource: resource, TokenType: "Bearer", ClientID: chosen.client})
	return nil
}
