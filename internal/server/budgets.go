package server

import (
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Budgets, a Cumulus extension: PUT/GET/DELETE …/workspaces/{ws}/budgets/{name}
// and GET …/workspaces/{ws}/budgets. The controllers keep their status.
func (s *Server) budgetRoutes() {
	r := &s.router
	r.handle("PUT", ws+"/budgets/{name}", s.putBudget)
	r.handle("GET", ws+"/budgets/{name}", s.getBudget)
	r.handle("DELETE", ws+"/budgets/{name}", s.deleteBudget)
	r.handle("GET", ws+"/budgets", s.listBudgets)
}

func (s *Server) putBudget(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var b api.Budget
	if err := decode(r, &b); err != nil {
		return err
	}
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	if err := api.PrepareBudget(&b, name); err != nil {
		return err
	}
	if b.Properties.Webhook != "" {
		if err := s.cfg.Webhooks.CheckURL(b.Properties.Webhook); err != nil {
			return &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidationError, Target: "properties.webhook", Message: err.Error()}
		}
	}
	now := s.clock.Now().UTC()
	b.ID, b.Name, b.Type = sc.WorkspaceID()+"/budgets/"+name, name, api.TypeBudget
	status := http.StatusCreated
	err := s.tx(r, func(q store.Querier) error {
		if c := b.Properties.Compute; c != "" {
			if _, err := s.compute(r.Context(), q, sc, c); err != nil {
				return api.BadRequest(api.CodeValidationError, "compute: compute %s does not exist in workspace %s", c, sc.Workspace)
			}
		}
		old, err := store.Get[api.Budget](r.Context(), q, store.KindBudget, sc.WorkspaceID(), name)
		switch {
		case err == nil:
			status = http.StatusOK
			b.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
			b.Properties.Status = old.Value.Properties.Status // the period's spending and alerts so far
		case isNotFound(err):
			b.SystemData = api.Touch(nil, principal(r), now)
		default:
			return err
		}
		_, err = store.Put(r.Context(), q, store.KindBudget, sc.WorkspaceID(), name, b, 0, now)
		return err
	})
	if err != nil {
		return err
	}
	s.changed() // the budgets' judge judges it within seconds
	writeJSON(w, status, b)
	return nil
}

func (s *Server) budget(r *http.Request, p params) (store.Doc[api.Budget], error) {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return store.Doc[api.Budget]{}, err
	}
	d, err := store.Get[api.Budget](r.Context(), s.db.Q(), store.KindBudget, sc.WorkspaceID(), p["name"])
	if isNotFound(err) {
		return d, api.NotFound("budget %s was not found in workspace %s", p["name"], sc.Workspace)
	}
	return d, err
}

func (s *Server) getBudget(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.budget(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.Value)
	return nil
}

func (s *Server) deleteBudget(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	err := s.tx(r, func(q store.Querier) error {
		return store.Delete(r.Context(), q, store.KindBudget, sc.WorkspaceID(), p["name"], 0)
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	s.changed()
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	return listPage[api.Budget](s, w, r, store.KindBudget, sc.WorkspaceID(), true, func(b api.Budget) any { return b })
}
