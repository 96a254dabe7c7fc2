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
	since := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	until := now
	for _, x := range []struct {
		key string
		to  *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(x.key); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return api.BadRequest(api.CodeBadRequest, "%s %q is not an RFC 3339 time such as 2024-05-01T00:00:00Z", x.key, v)
			}
			*x.to = t.UTC()
		}
	}
	if until.After(now) {
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
