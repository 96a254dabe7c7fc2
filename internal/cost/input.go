package cost

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// ReadInput reads the ledger of a period for the computes whose keys
// begin with prefix (a workspace's "…/workspaces/ws/computes/", a resource
// group's "…/workspaces/"), with their names and tags, and the jobs' tags
// when asked.
func ReadInput(ctx context.Context, q store.Querier, prefix string, since, until time.Time, prices Prices, jobTags bool) (Input, error) {
	in := Input{Since: since, Until: until, Prices: prices, Computes: map[string]Compute{}, JobTags: map[string]map[string]string{}}
	nodes, err := store.NodeBills(ctx, q, since, until)
	if err != nil {
		return in, err
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.Compute, prefix) {
			in.Nodes = append(in.Nodes, n)
		}
	}
	runs, err := store.JobRuns(ctx, q, since, until)
	if err != nil {
		return in, err
	}
	for _, run := range runs {
		if !strings.HasPrefix(run.Compute, prefix) {
			continue
		}
		in.Runs = append(in.Runs, run)
		if _, seen := in.JobTags[run.Job]; jobTags && !seen {
			j, err := store.GetJobByUID(ctx, q, run.Job)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
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
		c := Compute{Workspace: ws, Name: name}
		d, err := store.Get[api.Compute](ctx, q, store.KindCompute, parent, name)
		switch {
		case err == nil:
			c.Name, c.Tags = d.Value.Name, d.Value.Tags
		case !errors.Is(err, store.ErrNotFound):
			return in, err
		}
		group := parent[:strings.LastIndex(parent, "/providers/")]
		if w, err := store.Get[api.Workspace](ctx, q, store.KindWorkspace, group, ws); err == nil {
			c.Workspace = w.Value.Name
		}
		in.Computes[n.Compute] = c
	}
	return in, nil
}
