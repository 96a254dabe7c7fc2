package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/fairshare"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Defaults and bounds of the queue view's $top.
const (
	defaultQueueTop = 100
	maxQueueTop     = 1000
)

// getQueue answers GET …/computes/{name}/queue (a Cumulus extension): the
// compute's queued jobs in the order its scheduler will start them (the
// first $top, default 100), each with why it waits, and under fair share
// where each group stands.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, p params) error {
	top := defaultQueueTop
	if t := r.URL.Query().Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > maxQueueTop {
			return api.BadRequest(api.CodeBadRequest, "$top must be a whole number from 1 to %d", maxQueueTop)
		}
		top = n
	}
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	comp := d.Value
	ctx := r.Context()
	q := s.db.Q()
	now := s.clock.Now().UTC()
	nodes, err := store.NodesOf(ctx, q, comp.ID)
	if err != nil {
		return err
	}
	st, err := fairshare.Read(ctx, q, comp, nodes, top, now)
	if err != nil {
		return err
	}
	cl := st.Cluster(comp, nodes, false, now)
	view := api.QueueView{Compute: comp.Name, Policy: api.QueuePolicy{Kind: api.QueuePolicyFifo, Preemption: api.PreemptNone}, Jobs: []api.QueueEntry{}}
	if qp := comp.Aml().QueuePolicy; qp != nil {
		view.Policy = *qp
	}
	if view.FairShare, err = s.fairShare(ctx, q, comp, cl, now); err != nil {
		return err
	}
	if view.Queued, err = store.CountJobs(ctx, q, comp.ID, api.JobQueued); err != nil {
		return err
	}
	for _, k := range decide.Order(cl, now) {
		if len(view.Jobs) == top {
			break
		}
		j, err := store.GetJobByUID(ctx, q, cl.Queued[k].ID)
		if err != nil {
			if isNotFound(err) {
				continue // it left the queue since
			}
			return err
		}
		e := api.QueueEntry{Position: len(view.Jobs) + 1, Name: j.Doc.Name, Group: j.Doc.Properties.FairShareGroup,
			Priority: j.Doc.Properties.Priority, Nodes: j.Doc.InstanceCount(), Queued: j.Created}
		if e.Group != nil {
			e.Display = comp.Queue().GroupName(*e.Group)
		}
		if h := j.Doc.Properties.History; len(h) > 0 {
			e.Queued = h[len(h)-1].Time
		}
		if j.Doc.Properties.WordsWait() {
			e.Reason = api.QueueReason(comp, &j.Doc, j.UID)
		} else {
			e.Reason = j.Doc.Properties.StatusMessage
		}
		view.Jobs = append(view.Jobs, e)
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// fairShare says where each group of a fair-share compute stands now; nil
// for another compute. cl is its snapshot (fairshare.State.Cluster); the
// queued counts are the whole queue's.
func (s *Server) fairShare(ctx context.Context, q store.Querier, comp api.Compute, cl decide.Cluster, now time.Time) (*api.FairShareStatus, error) {
	policy := comp.Queue()
	if !policy.FairShare {
		return nil, nil
	}
	counts, err := store.QueuedByGroup(ctx, q, comp.ID)
	if err != nil {
		return nil, err
	}
	unit, per := "node", 1.0
	if size, ok := catalog.Lookup(comp.Aml().VMSize); ok && size.GPUs > 0 {
		unit, per = "GPU", float64(size.GPUs)
	}
	out := &api.FairShareStatus{Unit: unit, Groups: []api.GroupShare{}}
	for _, g := range decide.Groups(cl, now) {
		c := counts[g.Name]
		out.Groups = append(out.Groups, api.GroupShare{Name: g.Name, Display: policy.GroupName(g.Name), Weight: g.Weight,
			UsageHours: g.Usage / 3600 * per, RecentNodes: g.Recent, Nodes: g.Held, Share: g.Share, QueuedJobs: c.Jobs, QueuedNodes: c.Nodes})
	}
	// Groups with weights but no work or usage are shown too: a platform
	// team sees what it configured.
	for name, w := range policy.Weights {
		if !slices.ContainsFunc(out.Groups, func(g api.GroupShare) bool { return g.Name == name }) {
			out.Groups = append(out.Groups, api.GroupShare{Name: name, Display: policy.GroupName(name), Weight: w})
		}
	}
	slices.SortFunc(out.Groups, func(a, b api.GroupShare) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// regroup moves a compute's unfinished jobs into their groups when a PUT or
// PATCH changed its grouping from was (lifecycle.Grouping of the stored
// compute, read before the change), in the same transaction.
func regroup(ctx context.Context, q store.Querier, was string, c api.Compute) error {
	if lifecycle.Grouping(&c) == was {
		return nil
	}
	_, err := lifecycle.Regroup(ctx, q, c)
	return err
}
