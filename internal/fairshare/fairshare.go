// Package fairshare reads what a compute's queue policy decides from out
// of the store, as decide's inputs: the head of its queue (each group's,
// under fair share), the jobs that hold its nodes, and each group's
// decayed usage. The cluster controller reads it on each pass and keeps
// the usage (Save writes a group's record only when the nodes it holds
// changed); the API reads it to say where each group stands and in what
// order the queue will start. The decisions themselves are decide's.
package fairshare

import (
	"context"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// State is a compute's queue as its policy sees it.
type State struct {
	Queue api.Queue
	// Queued is the head of the queue in scheduling order: at most limit
	// jobs, of each group under fair share.
	Queued []store.QueuedJob
	// Running and Usage are read under fair share or with preemption
	// (Usage under fair share only): the jobs that hold the compute's
	// nodes, and each group's usage as of the read.
	Running []decide.Running
	Usage   map[string]decide.Usage
	// changed are the groups whose holding changed since their record.
	changed map[string]store.ShareUsage
	compute string
}

// Read reads compute comp's queue head (limit jobs, of each group under
// fair share) and, when its policy needs them, the jobs that hold its
// nodes and its groups' usage at now; nodes are its nodes as just read.
func Read(ctx context.Context, q store.Querier, comp api.Compute, nodes []store.Node, limit int, now time.Time) (*State, error) {
	s := &State{Queue: comp.Queue(), compute: comp.ID}
	var err error
	if s.Queue.FairShare {
		s.Queued, err = store.QueuedJobsByGroup(ctx, q, comp.ID, limit)
	} else {
		s.Queued, err = store.QueuedJobs(ctx, q, comp.ID, limit)
	}
	if err != nil || (!s.Queue.FairShare && s.Queue.Preemption == api.PreemptNone) {
		return s, err
	}
	rj, err := store.RunningJobs(ctx, q, comp.ID)
	if err != nil {
		return s, err
	}
	s.Running = make([]decide.Running, 0, len(rj))
	group := make(map[string]string, len(rj))
	for _, j := range rj {
		s.Running = append(s.Running, decide.Running{ID: j.UID, Name: j.Name, Group: j.Group, Priority: j.Priority, Seq: j.Seq,
			Started: j.Started, MinRuntime: j.MinRuntime})
		group[j.UID] = j.Group
	}
	if !s.Queue.FairShare {
		return s, nil
	}
	held := map[string]int{}
	for _, n := range nodes {
		if g, ok := group[n.JobID]; ok && n.State != api.NodePreempted && n.State != api.NodeUnusable {
			held[g]++
		}
	}
	stored, err := store.ShareUsages(ctx, q, comp.ID)
	if err != nil {
		return s, err
	}
	s.Usage = make(map[string]decide.Usage, len(stored)+len(held))
	s.changed = map[string]store.ShareUsage{}
	for g, r := range stored {
		u := decide.Usage{Value: r.Value, At: r.At, Held: r.Held}
		if h := held[g]; h != r.Held {
			u = u.Advance(now, s.Queue.HalfLife, h)
			s.changed[g] = store.ShareUsage{Value: u.Value, At: u.At, Held: u.Held}
		}
		s.Usage[g] = u
	}
	for g, h := range held {
		if _, ok := stored[g]; !ok {
			u := decide.Usage{}.Advance(now, s.Queue.HalfLife, h)
			s.changed[g] = store.ShareUsage{Value: u.Value, At: u.At, Held: u.Held}
			s.Usage[g] = u
		}
	}
	return s, nil
}

// Jobs is the queue head as decide's jobs; with images, each job's image
// (image-bound clusters).
func (s *State) Jobs(images bool) []decide.Job {
	out := make([]decide.Job, 0, len(s.Queued))
	for _, j := range s.Queued {
		dj := decide.Job{ID: j.UID, Name: j.Name, InstanceCount: j.Nodes, Priority: j.Priority, Seq: j.Seq, Group: j.Group}
		if images {
			dj.Image = j.Image
		}
		out = append(out, dj)
	}
	return out
}

// Save writes the usage of the groups whose holding changed since their
// record: nothing when none did.
func (s *State) Save(ctx context.Context, db *store.DB) error {
	if len(s.changed) == 0 {
		return nil
	}
	return db.Tx(ctx, func(q store.Querier) error {
		for g, u := range s.changed {
			if err := store.PutShareUsage(ctx, q, s.compute, g, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// Cluster is the decision's view of the compute's queue at now with its
// nodes (decide.ForCompute, then nodes, queue, running jobs and usage), the
// one the controller decides from and the API shows: imageBound says
// whether each node runs one image (the provider makes nodes from jobs'
// images). What holds growth (quota, backoff, budgets, GPUs) is the
// controller's to add.
func (s *State) Cluster(comp api.Compute, nodes []store.Node, imageBound bool, now time.Time) decide.Cluster {
	c := decide.ForCompute(comp, now)
	c.Nodes = make([]decide.Node, 0, len(nodes))
	for _, n := range nodes {
		c.Nodes = append(c.Nodes, decide.Node{ID: n.ID, State: n.State, JobID: n.JobID, IdleSince: n.IdleSince, Created: n.Created,
			Image: n.Image, SSHOpen: n.SSHOpen > 0})
	}
	c.ImageBound = imageBound
	c.Queued, c.Running, c.Usage = s.Jobs(imageBound), s.Running, s.Usage
	return c
}
