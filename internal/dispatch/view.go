package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// view reads what Instructions decides from for one node's poll: the
// node itself unless known is the node as just read. It reads an
// assignment's Work only when the node's job is pending for the agent, so
// a poll of a node busy with its job costs a few reads.
func (s *Service) view(ctx context.Context, q store.Querier, nodeID string, known *store.Node, reported []agentapi.JobState) (View, error) {
	var n store.Node
	if known != nil {
		n = *known
	} else {
		var err error
		n, err = store.GetNode(ctx, q, nodeID)
		if errors.Is(err, store.ErrNotFound) {
			return View{}, nil
		}
		if err != nil {
			return View{}, err
		}
	}
	var err error
	v := View{Known: true, Node: n, Jobs: map[string]store.Job{}}
	uids := []string{n.JobID}
	for _, st := range reported {
		if st.Phase == agentapi.PhaseRunning {
			uids = append(uids, st.UID)
		}
	}
	for _, uid := range uids {
		if _, done := v.Jobs[uid]; done || uid == "" {
			continue
		}
		j, err := store.GetJobByUID(ctx, q, uid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return v, err
		}
		v.Jobs[uid] = j
	}
	if !n.Evicted.IsZero() || reclaimedRuns(v, reported) {
		if v.Grace, err = preemptGrace(ctx, q, n); err != nil {
			return v, err
		}
	}
	if j, ok := pending(v, reported); ok {
		if v.Work, err = s.work(ctx, q, j, n); err != nil {
			return v, err
		}
	}
	return v, nil
}

// work reads what an assignment of job j to node self needs beyond the job
// and node.
func (s *Service) work(ctx context.Context, q store.Querier, j store.Job, self store.Node) (Work, error) {
	w := Work{NodeIPs: make([]string, len(j.Nodes))}
	for i, id := range j.Nodes {
		if id == self.ID {
			w.NodeIPs[i] = self.Address // read already
			continue
		}
		n, err := store.GetNode(ctx, q, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return w, err
		}
		w.NodeIPs[i] = n.Address
	}
	if s.Outputs != nil {
		w.Checkpoint = s.Outputs.Has(j.UID, agentapi.CheckpointOutput)
	}
	s.costLimit(ctx, q, j, &w)
	if s.LaunchToken != nil {
		w.LaunchToken = s.LaunchToken(j.UID, j.Attempt)
	}
	if s.TrackingToken != nil {
		w.TrackingToken = s.TrackingToken(j.UID)
	}
	if s.ClientID == nil {
		return w, nil
	}
	comp, found, err := compute(ctx, q, j.Compute)
	if err != nil || !found {
		return w, err
	}
	w.DefaultClientID, w.Identity = s.ClientID(comp)
	return w, nil
}

// reclaimedRuns reports whether the agent runs an attempt of the node's job
// that the queue policy stopped (Instructions then needs the grace).
func reclaimedRuns(v View, reported []agentapi.JobState) bool {
	j, ok := v.Jobs[v.Node.JobID]
	if !ok {
		return false
	}
	for _, st := range reported {
		if st.UID == j.UID && st.Phase == agentapi.PhaseRunning && reclaimed(j, st.Attempt) {
			return true
		}
	}
	return false
}

// preemptGrace is the grace of a node's compute for preempted jobs (the
// default when the compute is gone).
func preemptGrace(ctx context.Context, q store.Querier, n store.Node) (time.Duration, error) {
	c, found, err := compute(ctx, q, n.Compute)
	if err != nil {
		return 0, err
	}
	if found {
		return c.PreemptionGrace(), nil
	}
	g, _ := api.ParseDuration(api.DefaultPreemptionGrace)
	return g, nil
}

// compute reads a compute by its id; found is false when the id names no
// compute the store has.
func compute(ctx context.Context, q store.Querier, id string) (c api.Compute, found bool, err error) {
	sc, name, err := api.ParseComputeID(id, api.Scope{})
	if err != nil {
		return c, false, nil // not an id a compute can have
	}
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, sc.WorkspaceID(), name)
	if errors.Is(err, store.ErrNotFound) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	return d.Value, true, nil
}
