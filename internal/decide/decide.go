package decide

import (
	"slices"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Decide decides what a cluster should do now: decideNodes (scheduling and
// autoscaling), then the holds on growth that are not the cluster's own
// size: a provider backing off after failures and budgets in force, then
// what the queue policy adds (preemptions, where fair-share groups stand;
// see fairshare.go). It wakes the plan when a schedule next changes the
// bounds.
func Decide(c Cluster, now time.Time) Plan {
	var s *shares // the queue policy's state, made once
	queue := c.Queue.FairShare || c.Queue.Preemption != api.PreemptNone
	if queue && !c.ImageBound {
		s = newShares(&c, now)
	}
	p := decideNodes(c, now, s)
	p.WakeAt = earliest(p.WakeAt, c.BoundsChange, now)
	if now.Before(c.Backoff.Until) {
		p = holdForBackoff(p, c.Backoff, now)
	}
	if len(c.Budgets) > 0 {
		p = holdForBudget(p, c)
	}
	if queue {
		if s == nil {
			s = newShares(&c, now)
		}
		p = decideQueue(c, p, s, now)
	}
	return p
}

// decideNodes runs Schedule, then Autoscale on the snapshot with the
// assignments applied (assigned nodes running, assigned jobs out of the
// queue), and returns one Plan with Assign filled: the same Plan as
// Autoscale(ApplyAssignments(c, Schedule(c)), now) plus Assign, computed
// without copying the snapshot. Assigning first is what keeps a node that
// gets a job in this pass from being removed in the same pass.
// s, when not nil, is the fair-share state of c (its order).
func decideNodes(c Cluster, now time.Time, s *shares) Plan {
	if c.ImageBound {
		return decideImages(c, now)
	}
	_, hi := limits(c)
	v := newView(c)
	if s != nil && c.Queue.FairShare {
		v.order = s.order(2*hi + 1)
	} else {
		v.order = orderOf(c, now)
	}
	assign, used := schedule(c, &v)
	// Apply the assignments to the view: the nodes used become busy and
	// the demand drops by as many. Jobs that can never run are never
	// placed, so unfit stays.
	if used > 0 {
		v.busy = append(v.busy[:len(v.busy):len(v.busy)], v.idle[:used]...)
		v.idle = v.idle[used:]
	}
	demand, unfit := demandOf(c.Queued, hi)
	p := autoscale(c, &v, demand-used, unfit, len(assign), now)
	p.Assign = assign
	return p
}

// holdForBackoff keeps a plan from creating nodes while the provider backs
// off; it says so and wakes when the backoff ends.
func holdForBackoff(p Plan, b Backoff, now time.Time) Plan {
	if p.Create == 0 {
		return p
	}
	p.Target -= p.Create
	p.Create, p.CreateImages = 0, nil
	p.Blocked = append(p.Blocked, api.Block{Kind: api.BlockBackoff, Message: b.Message})
	p.WakeAt = earliest(p.WakeAt, b.Until, now)
	return p
}

// earliest is the earlier of two wake-up times after now; a zero time
// (or one not after now) is none.
func earliest(a, b, now time.Time) time.Time {
	if !b.After(now) {
		return a
	}
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// ApplyAssignments returns a copy of c in which every assigned node is
// running its job and every assigned job has left the queue. c is not
// modified. Assignments naming unknown nodes are applied to the nodes that
// exist.
func ApplyAssignments(c Cluster, as []Assignment) Cluster {
	if len(as) == 0 {
		return c
	}
	placed := 0
	for _, a := range as {
		placed += len(a.NodeIDs)
	}
	jobOf := make(map[string]string, placed) // node ID -> job ID
	started := make(map[string]bool, len(as))
	for _, a := range as {
		started[a.JobID] = true
		for _, id := range a.NodeIDs {
			jobOf[id] = a.JobID
		}
	}
	out := c
	out.Nodes = slices.Clone(c.Nodes)
	for i := range out.Nodes {
		if job, ok := jobOf[out.Nodes[i].ID]; ok {
			out.Nodes[i].State = NodeRunning
			out.Nodes[i].JobID = job
		}
	}
	out.Queued = make([]Job, 0, len(c.Queued))
	for _, j := range c.Queued {
		if !started[j.ID] {
			out.Queued = append(out.Queued, j)
		}
	}
	return out
}
