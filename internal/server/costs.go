package server

import (
	"net/http"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Cost reports, a Cumulus extension: what the nodes of a workspace's
// computes (GET …/workspaces/{ws}/costs) or of a resource group's
// (GET /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/costs)
// cost in a period, by compute, job, workspace or tag:KEY.
//
// Query: by (default compute), since and until (RFC 3339; default the
// current calendar month, UTC, until now).
func (s *Server) costRoutes() {
	s.router.handle("GET", ws+"/costs", s.costs)
	s.router.handle("GET", "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/costs", s.costs)
}

func (s *Server) costs(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	prefix := store.Key("/subscriptions/" + sc.Subscription + "/resourceGroups/" + sc.ResourceGroup + "/providers/" + api.Provider + "/workspaces/")
	if sc.Workspace != "" {
		if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
			return err
		}
		prefix = store.Key(sc.WorkspaceID()) + "/computes/"
	}
	q := r.URL.Query()
	by := q.Get("by")
	if by == "" {
		by = cost.ByCompute
	}
	kind, tag, err := cost.ParseBy(by)
	if err != nil {
		return api.BadRequest(api.CodeBadRequest, "%s", err)
	}
	now := s.clock.Now().UTC()
	since, until, err := timeRange(q, now, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	if until.IsZero() || until.After(now) {
		until = now
	}
	if !until.After(since) {
		return api.BadRequest(api.CodeBadRequest, "until must be after since (and since in the past)")
	}
	in, err := cost.ReadInput(r.Context(), s.db.Q(), prefix, since, until, s.cfg.Prices, kind == cost.ByTag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cost.Make(in, kind, tag))
	return nil
}
