package server

import (
	"context"
	"net/http"
	"strings"
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
	in, err := s.costInput(r.Context(), prefix, since, until, kind == cost.ByTag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cost.Make(in, kind, tag))
	return nil
}

// costInput reads the ledger of the period for the computes under prefix,
// with their names and tags (and the jobs' tags, when asked).
func (s *Server) costInput(ctx context.Context, prefix string, since, until time.Time, jobTags bool) (cost.Input, error) {
	in := cost.Input{Since: since, Until: until, Prices: s.cfg.Prices, Computes: map[string]cost.Compute{}, JobTags: map[string]map[string]string{}}
	nodes, err := store.NodeBills(ctx, s.db.Q(), since, until)
	if err != nil {
		return in, err
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.Compute, prefix) {
			in.Nodes = append(in.Nodes, n)
		}
	}
	runs, err := store.JobRuns(ctx, s.db.Q(), since, until)
	if err != nil {
		return in, err
	}
	for _, run := range runs {
		if !strings.HasPrefix(run.Compute, prefix) {
			continue
		}
		in.Runs = append(in.Runs, run)
		if _, seen := in.JobTags[run.Job]; jobTags && !seen {
			j, err := store.GetJobByUID(ctx, s.db.Q(), run.Job)
			if err != nil && !isNotFound(err) {
				return in, err
			}
			in.JobTags[run.Job] = j.Doc.Properties.Tags // nil for a deleted job
		}
	}
	for _, n := range in.Nodes {
		if _, seen := in.Computes[n.Compute]; seen {
			continue
		}
		parent, name, _ := strings.Cut(n.Compute, "/computes/")
		ws := parent[strings.LastIndex(parent, "/")+1:]
		c := cost.Compute{Workspace: ws, Name: name}
		d, err := store.Get[api.Compute](ctx, s.db.Q(), store.KindCompute, parent, name)
		switch {
		case err == nil:
			c.Name, c.Tags = d.Value.Name, d.Value.Tags
		case !isNotFound(err):
			return in, err
		}
		group := parent[:strings.LastIndex(parent, "/providers/")]
		if w, err := store.Get[api.Workspace](ctx, s.db.Q(), store.KindWorkspace, group, ws); err == nil {
			c.Workspace = w.Value.Name
		}
		in.Computes[n.Compute] = c
	}
	return in, nil
}
