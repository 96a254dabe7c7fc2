package controller

import (
	"context"
	"errors"
	"time"

	"github.com/cumulus-ml/cumulus/internal/actuate"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The adaptive idle policy (api.IdlePolicy kind Adaptive) reads a
// decide.IdleHistory of the compute's recent demand, fed through
// actuate.Demand as the simulator feeds it. The controller keeps one per
// adaptive compute in memory and tells it what passes see of jobs coming
// and going; on start (or when a compute turns adaptive) it rebuilds it
// from the store. Computes with the fixed timeout cost nothing here.

const (
	// rebuildJobs and rebuildSpan bound what a rebuild reads: the newest
	// jobs of the compute, and of those the events of the last week. The
	// history keeps 1024 demand events; each job is at most two.
	rebuildJobs = 2048
	rebuildSpan = 7 * 24 * time.Hour
	// foundIdleWithin: on a rebuild, a job assigned within this of its
	// submission is taken to have found idle nodes (the count a pass saw
	// is not stored).
	foundIdleWithin = time.Second
)

// idleTrack is what the controller knows of one adaptive compute's demand:
// the history its policy reads, and what it needs to feed the history
// incrementally. Only the pass touches it.
type idleTrack struct {
	demand  *actuate.Demand
	created time.Time       // the compute's createdOn: one made again under the same name starts afresh
	lastSeq int64           // the newest job submission recorded
	holding map[string]bool // jobs that held nodes when last seen, by uid: their end is a release
	ready   map[string]bool // nodes whose provisioning delay is recorded
}

// idlePolicy returns the idle policy of a compute for this pass, after the
// history has learned what happened since the last pass: nil (the fixed
// nodeIdleTimeBeforeScaleDown) unless the compute is adaptive.
func (c *Clusters) idlePolicy(ctx context.Context, comp api.Compute, nodes []store.Node) decide.IdlePolicy {
	weight, ok := comp.AdaptiveIdle()
	if !ok {
		return nil
	}
	_, _, timeout := comp.Scale()
	opt := decide.DefaultAdaptive()
	opt.DelayWeight = weight
	key := store.Key(comp.ID)
	tr := c.idle[key]
	if tr == nil || !tr.created.Equal(createdOn(comp)) {
		tr = &idleTrack{created: createdOn(comp), demand: actuate.NewDemand(opt.Window), holding: map[string]bool{}, ready: map[string]bool{}}
		if err := c.rebuildIdle(ctx, tr, comp, nodes); err != nil {
			c.Log.Warn("idle history not rebuilt; the fixed idle timeout applies this pass", "compute", comp.Name, "err", err)
			return nil
		}
		c.idle[key] = tr
	}
	if err := c.observeDemand(ctx, tr, comp, nodes); err != nil {
		c.Log.Warn("idle history not updated this pass", "compute", comp.Name, "err", err)
	}
	// The history learns what it was told, under the timeout it holds
	// itself to.
	return tr.demand.Policy(timeout, opt)
}

// rebuildIdle fills a new history from the store: the compute's recent
// jobs as arrivals (at submission) and releases (at the end of those that
// ran), and the jobs that hold nodes now, whose end is still to come.
func (c *Clusters) rebuildIdle(ctx context.Context, tr *idleTrack, comp api.Compute, nodes []store.Node) error {
	jobs, err := store.RecentJobs(ctx, c.DB.Q(), comp.ID, rebuildJobs)
	if err != nil {
		return err
	}
	since := c.Clock.Now().Add(-rebuildSpan)
	events := 0
	terminal := map[string]bool{} // their release is recorded (or too old)
	for _, j := range jobs {
		tr.lastSeq = max(tr.lastSeq, j.Seq)
		n := j.Doc.InstanceCount()
		if !j.Created.Before(since) {
			tr.demand.Arrive(j.Created, n, idleFound(j))
			events++
		}
		if t, ok := released(j); ok && !t.Before(since) {
			tr.demand.Release(t, n)
			events++
		}
		if api.JobTerminal(j.Doc.Properties.Status) {
			terminal[j.UID] = true
		}
	}
	for _, n := range nodes {
		if n.JobID != "" && !terminal[n.JobID] {
			tr.holding[n.JobID] = true
		}
	}
	c.Log.Info("idle history rebuilt", "compute", comp.Name, "jobs", len(jobs), "events", events)
	return nil
}

// observeDemand gives the history what happened since the last pass: jobs
// submitted (with the idle nodes they found: this pass's, less what the
// jobs before them in the same pass take), jobs that ran and no longer
// hold a node, and nodes that became ready.
func (c *Clusters) observeDemand(ctx context.Context, tr *idleTrack, comp api.Compute, nodes []store.Node) error {
	subs, err := store.SubmittedAfter(ctx, c.DB.Q(), comp.ID, tr.lastSeq)
	if err != nil {
		return err
	}
	held := make(map[string]bool, len(tr.holding))
	idle := 0
	for _, n := range nodes {
		if n.JobID != "" && tr.holding[n.JobID] {
			held[n.JobID] = true
		}
		if n.State == api.NodeIdle && n.JobID == "" && n.SSHOpen == 0 {
			idle++
		}
	}
	type ended struct {
		at    time.Time
		nodes int
	}
	var releases []ended
	var done []string
	for uid := range tr.holding {
		if held[uid] {
			continue
		}
		j, err := store.GetJobByUID(ctx, c.DB.Q(), uid)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		done = append(done, uid)
		if t, ok := released(j); err == nil && ok {
			releases = append(releases, ended{t, j.Doc.InstanceCount()})
		}
	}
	// Nothing failed: the history learns it all at once.
	for _, r := range releases {
		tr.demand.Release(r.at, r.nodes)
	}
	for _, s := range subs {
		tr.demand.Arrive(s.Created, s.Nodes, idle)
		idle = max(idle-s.Nodes, 0)
	}
	for _, uid := range done {
		delete(tr.holding, uid)
	}
	if len(subs) > 0 {
		tr.lastSeq = subs[len(subs)-1].Seq
	}
	c.observeProvisioning(tr, nodes)
	return nil
}

// noteAssigned records the jobs a pass assigned: their end will be a
// release.
func (c *Clusters) noteAssigned(comp api.Compute, as []decide.Assignment) {
	tr := c.idle[store.Key(comp.ID)]
	if tr == nil {
		return
	}
	for _, a := range as {
		tr.holding[a.JobID] = true
	}
}

// observeProvisioning records how long each node the provider made took
// from request to ready, once per node.
func (c *Clusters) observeProvisioning(tr *idleTrack, nodes []store.Node) {
	for _, n := range nodes {
		if !n.Ready.IsZero() && n.Provider == c.Provider.Name() && !tr.ready[n.ID] {
			tr.ready[n.ID] = true
			tr.demand.Ready(n.Ready, n.Ready.Sub(n.Created))
		}
	}
	if len(tr.ready) > 2*len(nodes)+16 {
		// Forget the nodes that are gone.
		present := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			if tr.ready[n.ID] {
				present[n.ID] = true
			}
		}
		tr.ready = present
	}
}

// dropIdleHistories forgets the histories of computes that are gone or no
// longer adaptive.
func (c *Clusters) dropIdleHistories(docs []store.Doc[api.Compute]) {
	if len(c.idle) == 0 {
		return
	}
	keep := map[string]bool{}
	for _, d := range docs {
		if _, ok := d.Value.AdaptiveIdle(); ok {
			keep[store.Key(d.Value.ID)] = true
		}
	}
	for key := range c.idle {
		if !keep[key] {
			delete(c.idle, key)
			c.Log.Info("idle history dropped", "compute", key)
		}
	}
}

// released is when a job that ran (was given nodes) ended, releasing its
// nodes; false for a job that has not ended or never ran.
func released(j store.Job) (time.Time, bool) {
	p := j.Doc.Properties
	if !api.JobTerminal(p.Status) || len(p.Attempts) == 0 || p.EndTime == nil {
		return time.Time{}, false
	}
	return *p.EndTime, true
}

// idleFound estimates, for a job read back from the store, how many idle
// nodes it found when it was submitted: all it needed when it was assigned
// within foundIdleWithin, none otherwise.
func idleFound(j store.Job) int {
	for _, s := range j.Doc.Properties.History {
		if s.Status == api.JobPreparing {
			if s.Time.Sub(j.Created) <= foundIdleWithin {
				return j.Doc.InstanceCount()
			}
			return 0
		}
	}
	return 0
}

func createdOn(c api.Compute) time.Time {
	if t := c.Properties.CreatedOn; t != nil {
		return *t
	}
	return time.Time{}
}
