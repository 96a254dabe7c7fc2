package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Access management (a Cumulus extension under /cumulus/v1): principals,
// their bearer tokens, role assignments, and the audit log. Managing
// principals and tokens needs Owner at "/"; assigning a role needs Owner
// at the assignment's scope; the audit log needs Owner, or Reader of
// everything for a read-only auditor.

// TokenCreated is the answer of a token creation: the only time the
// token itself is shown.
type TokenCreated struct {
	ID        string     `json:"id"`
	Principal string     `json:"principal"`
	Token     string     `json:"token"`
	Expires   *time.Time `json:"expires,omitempty"`
}

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID        string     `json:"id"`
	Principal string     `json:"principal"`
	Created   time.Time  `json:"created"`
	Expires   *time.Time `json:"expires,omitempty"`
	Revoked   bool       `json:"revoked"`
}

func (s *Server) accessRoutes() {
	a := &s.agents
	a.handle("GET", "/cumulus/v1/auth/principals", s.listPrincipals)
	a.handle("POST", "/cumulus/v1/auth/principals", s.createPrincipal)
	a.handle("GET", "/cumulus/v1/auth/tokens", s.listTokens)
	a.handle("POST", "/cumulus/v1/auth/tokens", s.createToken)
	a.handle("DELETE", "/cumulus/v1/auth/tokens/{id}", s.revokeToken)
	a.handle("GET", "/cumulus/v1/auth/roleAssignments", s.listRoleAssignments)
	a.handle("POST", "/cumulus/v1/auth/roleAssignments", s.createRoleAssignment)
	a.handle("DELETE", "/cumulus/v1/auth/roleAssignments/{id}", s.deleteRoleAssignment)
	a.handle("GET", "/cumulus/v1/audit", s.listAudit)
}

// accessCheck signs the caller in and checks an action at a scope; writes
// are audited.
func (s *Server) accessCheck(w http.ResponseWriter, r *http.Request, scope string, action rbac.Action) error {
	if err := s.authenticateRequest(r); err != nil {
		return err
	}
	return s.allow(r, scope, action)
}

// audited runs a write handler and records it in the audit log.
func (s *Server) audited(w http.ResponseWriter, r *http.Request, fn func(*statusRecorder) error) error {
	rec, ok := w.(*statusRecorder)
	if !ok {
		rec = &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	}
	err := fn(rec)
	status := rec.status
	if err != nil {
		status = toAPIError(err).Status
	}
	s.audit(r, status)
	return err
}

func (s *Server) listPrincipals(w http.ResponseWriter, r *http.Request, _ params) error {
	if err := s.accessCheck(w, r, "/", rbac.Access); err != nil {
		return err
	}
	ps, err := store.ListPrincipals(r.Context(), s.db.Q())
	if err != nil {
		return err
	}
	if ps == nil {
		ps = []store.Principal{}
	}
	writeJSON(w, http.StatusOK, api.Page[store.Principal]{Value: ps})
	return nil
}

func (s *Server) createPrincipal(w http.ResponseWriter, r *http.Request, _ params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		if err := s.accessCheck(rec, r, "/", rbac.Access); err != nil {
			return err
		}
		var p store.Principal
		if err := decode(r, &p); err != nil {
			return err
		}
		if err := api.CheckJobName(p.Name); err != nil {
			return api.BadRequest(api.CodeInvalidName, "principal %s", strings.TrimPrefix(err.Error(), "job "))
		}
		switch strings.ToLower(p.Kind) {
		case "", "user":
			p.Kind = "User"
		case "serviceprincipal", "service":
			p.Kind = "ServicePrincipal"
		default:
			return api.BadRequest(api.CodeValidationError, "kind %q is not one of User, ServicePrincipal", p.Kind)
		}
		p.Created = s.clock.Now().UTC()
		err := s.tx(r, func(q store.Querier) error { return store.PutPrincipal(r.Context(), q, p) })
		if errors.Is(err, store.ErrExists) {
			return api.Conflict(api.CodeConflict, "principal %s already exists", p.Name)
		} else if err != nil {
			return err
		}
		writeJSON(rec, http.StatusCreated, p)
		return nil
	})
}

func tokenInfo(t store.Token) TokenInfo {
	ti := TokenInfo{ID: t.ID, Principal: t.Name, Created: t.Created, Revoked: t.Revoked}
	if !t.Expires.IsZero() {
		e := t.Expires
		ti.Expires = &e
	}
	return ti
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, _ params) error {
	if err := s.accessCheck(w, r, "/", rbac.Access); err != nil {
		return err
	}
	ts, err := store.ListTokens(r.Context(), s.db.Q(), r.URL.Query().Get("principal"))
	if err != nil {
		return err
	}
	out := []TokenInfo{}
	for _, t := range ts {
		out = append(out, tokenInfo(t))
	}
	writeJSON(w, http.StatusOK, api.Page[TokenInfo]{Value: out})
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, _ params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		if err := s.accessCheck(rec, r, "/", rbac.Access); err != nil {
			return err
		}
		var req struct {
			Principal string `json:"principal"`
			ExpiresIn string `json:"expiresIn"` // ISO-8601 or Go duration; "" never
		}
		if err := decode(r, &req); err != nil {
			return err
		}
		if _, err := store.GetPrincipal(r.Context(), s.db.Q(), req.Principal); err != nil {
			return api.BadRequest(api.CodeValidationError, "principal %q does not exist; create it with 'cumulus auth principal create'", req.Principal)
		}
		now := s.clock.Now().UTC()
		t := store.Token{ID: secret.NewID(), Name: req.Principal, Role: "", Created: now}
		if req.ExpiresIn != "" {
			d, err := api.ParseDuration(req.ExpiresIn)
			if err != nil {
				if d, err = time.ParseDuration(req.ExpiresIn); err != nil {
					return api.BadRequest(api.CodeValidationError, "expiresIn %q is not a duration (PT24H or 24h)", req.ExpiresIn)
				}
			}
			if d <= 0 {
				return api.BadRequest(api.CodeValidationError, "expiresIn must be positive")
			}
			t.Expires = now.Add(d)
		}
		tok := secret.NewToken("cml_")
		t.Hash = secret.Hash(tok)
		if err := s.tx(r, func(q store.Querier) error { return store.InsertToken(r.Context(), q, t) }); err != nil {
			return err
		}
		out := TokenCreated{ID: t.ID, Principal: t.Name, Token: tok}
		if !t.Expires.IsZero() {
			out.Expires = &t.Expires
		}
		writeJSON(rec, http.StatusCreated, out)
		return nil
	})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, p params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		if err := s.accessCheck(rec, r, "/", rbac.Access); err != nil {
			return err
		}
		err := s.tx(r, func(q store.Querier) error { return store.RevokeToken(r.Context(), q, p["id"]) })
		if isNotFound(err) {
			return api.NotFound("token %s was not found", p["id"])
		} else if err != nil {
			return err
		}
		rec.WriteHeader(http.StatusOK)
		return nil
	})
}

func (s *Server) listRoleAssignments(w http.ResponseWriter, r *http.Request, _ params) error {
	if err := s.authenticateRequest(r); err != nil {
		return err
	}
	who := r.URL.Query().Get("principal")
	if who != principal(r) { // everyone may see their own roles
		if err := s.allow(r, "/", rbac.Access); err != nil {
			return err
		}
	}
	as, err := store.RoleAssignments(r.Context(), s.db.Q(), who)
	if err != nil {
		return err
	}
	if as == nil {
		as = []store.RoleAssignment{}
	}
	writeJSON(w, http.StatusOK, api.Page[store.RoleAssignment]{Value: as})
	return nil
}

func (s *Server) createRoleAssignment(w http.ResponseWriter, r *http.Request, _ params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		var a store.RoleAssignment
		if err := s.authenticateRequest(r); err != nil {
			return err
		}
		if err := decode(r, &a); err != nil {
			return err
		}
		if a.Scope == "" {
			a.Scope = "/"
		}
		if a.Scope != "/" && !strings.HasPrefix(strings.ToLower(a.Scope), "/subscriptions/") {
			return api.BadRequest(api.CodeValidationError, "scope %q must be / or an ARM id (/subscriptions/S[/resourceGroups/G[/providers/…/workspaces/W]])", a.Scope)
		}
		if err := s.allow(r, a.Scope, rbac.Access); err != nil {
			return err
		}
		role := rbac.CanonicalRole(a.Role)
		if role == "" {
			return api.BadRequest(api.CodeValidationError, "role %q is not one of %s", a.Role, strings.Join(rbac.Roles(), ", "))
		}
		if _, err := store.GetPrincipal(r.Context(), s.db.Q(), a.Principal); err != nil {
			return api.BadRequest(api.CodeValidationError, "principal %q does not exist", a.Principal)
		}
		a.ID, a.Role, a.Created = secret.NewID(), role, s.clock.Now().UTC()
		if err := s.tx(r, func(q store.Querier) error { return store.PutRoleAssignment(r.Context(), q, a) }); err != nil {
			return err
		}
		writeJSON(rec, http.StatusCreated, a)
		return nil
	})
}

func (s *Server) deleteRoleAssignment(w http.ResponseWriter, r *http.Request, p params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		if err := s.accessCheck(rec, r, "/", rbac.Access); err != nil {
			return err
		}
		err := s.tx(r, func(q store.Querier) error { return store.DeleteRoleAssignment(r.Context(), q, p["id"]) })
		if isNotFound(err) {
			return api.NotFound("role assignment %s was not found", p["id"])
		} else if err != nil {
			return err
		}
		rec.WriteHeader(http.StatusOK)
		return nil
	})
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, _ params) error {
	if err := s.authenticateRequest(r); err != nil {
		return err
	}
	if err := s.allow(r, "/", rbac.Read); err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AuditFilter{Principal: q.Get("principal"), Resource: q.Get("resource"), Limit: 500}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return api.BadRequest(api.CodeBadRequest, "since must be an RFC 3339 time, e.g. 2026-11-21T10:00:00Z")
		}
		f.Since = t
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return api.BadRequest(api.CodeBadRequest, "after must be a sequence number")
		}
		f.After = n
	}
	es, err := store.ListAudit(r.Context(), s.db.Q(), f)
	if err != nil {
		return err
	}
	page := api.Page[store.AuditEntry]{Value: es}
	if page.Value == nil {
		page.Value = []store.AuditEntry{}
	}
	if len(es) == f.Limit {
		nq := r.URL.Query()
		nq.Set("after", strconv.FormatInt(es[len(es)-1].Seq, 10))
		page.NextLink = s.baseURL(r) + r.URL.Path + "?" + nq.Encode()
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
