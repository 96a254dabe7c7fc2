package controller

import (
	"context"
	"errors"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// shareInputs is what a queue policy decides from beyond nodes and the
// queue: the jobs that hold the compute's nodes and, under fair share,
// each group's decayed usage.
type shareInputs struct {
	running []decide.Running
	usage   map[string]decide.Usage
}

// readShares reads a compute's running jobs and, under fair share, keeps
// its groups' usage: a group's record is written only when the nodes it
// holds changed since the last (decide.Usage carries the decay between),
// so a pass over a cluster whose jobs did not start or end writes nothing.
func (c *Clusters) readShares(ctx context.Context, st clusterState, queue api.Queue, now time.Time) (shareInputs, error) {
	var in shareInputs
	comp := st.doc.Value
	rj, err := store.RunningJobs(ctx, c.DB.Q(), comp.ID)
	if err != nil {
		return in, err
	}
	in.running = make([]decide.Running, 0, len(rj))
	group := make(map[string]string, len(rj))
	for _, j := range rj {
		in.running = append(in.running, decide.Running{ID: j.UID, Name: j.Name, Group: j.Group, Priority: j.Priority, Seq: j.Seq,
			Started: j.Started, MinRuntime: j.MinRuntime})
		group[j.UID] = j.Group
	}
	if !queue.FairShare {
		return in, nil
	}
	held := map[string]int{}
	for _, n := range st.nodes {
		if g, ok := group[n.JobID]; ok && n.State != api.NodePreempted && n.State != api.NodeUnusable {
			held[g]++
		}
	}
	stored, err := store.ShareUsages(ctx, c.DB.Q(), comp.ID)
	if err != nil {
		return in, err
	}
	in.usage = make(map[string]decide.Usage, len(stored)+len(held))
	changed := map[string]store.ShareUsage{}
	for g, s := range stored {
		u := decide.Usage{Value: s.Value, At: s.At, Held: s.Held}
		if h := held[g]; h != s.Held {
			u = u.Advance(now, queue.HalfLife, h)
			changed[g] = store.ShareUsage{Value: u.Value, At: u.At, Held: u.Held}
		}
		in.usage[g] = u
	}
	for g, h := range held {
		if _, ok := stored[g]; !ok {
			u := decide.Usage{}.Advance(now, queue.HalfLife, h)
			changed[g] = store.ShareUsage{At: u.At, Held: h}
			in.usage[g] = u
		}
	}
	if len(changed) == 0 {
		return in, nil
	}
	return in, c.DB.Tx(ctx, func(q store.Querier) error {
		for g, u := range changed {
			if err := store.PutShareUsage(ctx, q, comp.ID, g, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// Preempt stops the running jobs the plan names (lifecycle.Reclaim), each
// in its own transaction with its event, and wakes their nodes' polls so
// their agents stop them now.
func (a *passActuator) Preempt(ctx context.Context, ps []api.Preemption) error {
	comp := a.st.doc.Value
	var errs []error
	for _, p := range ps {
		words := p.Words(&comp)
		var j store.Job
		err := a.c.DB.Tx(ctx, func(q store.Querier) (err error) {
			if j, err = lifecycle.Reclaim(ctx, q, p.Job, words, a.now); err != nil {
				return err
			}
			e := store.Event{Compute: comp.ID, Type: api.EventJobPreempted, Time: a.now}
			e.Message, e.Reason, e.Attempt, e.Nodes = j.Doc.Name+": "+words, p.Kind, j.Attempt, j.Nodes
			return store.AddEvent(ctx, q, e)
		})
		if errors.Is(err, lifecycle.ErrStale) || errors.Is(err, store.ErrNotFound) {
			continue // it ended or changed since the decision: the next pass decides again
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.c.Metrics.JobPreempted(comp.ID, p.Kind)
		a.c.Log.Info("job preempted", "compute", comp.Name, "job", j.Doc.Name, "reason", p.Kind, "for", p.ForName)
		for _, id := range j.Nodes {
			a.c.Hub.Wake(id)
		}
	}
	return errors.Join(errs...)
}
