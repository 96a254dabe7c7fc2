package decide

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// randomFairCluster draws a cluster as randomCluster does, under a random
// queue policy (fair share or FIFO, with or without preemption), with the
// jobs its nodes run, groups, weights and recent usage.
func randomFairCluster(r *rand.Rand) (Cluster, time.Time) {
	c, now := randomCluster(r)
	groups := []string{"a", "b", "c", ""}
	q := api.Queue{Preemption: []string{api.PreemptNone, api.PreemptLowerPriority, api.PreemptOverShare}[r.IntN(3)],
		MinRuntime: time.Duration(r.IntN(3)) * 10 * time.Minute}
	if r.IntN(4) > 0 {
		q.FairShare, q.By, q.HalfLife = true, api.FairShareByPrincipal, time.Duration(1+r.IntN(48))*time.Hour
		q.Weights = map[string]float64{"a": float64(1 + r.IntN(3)), "c": 0.5}
	} else if q.Preemption == api.PreemptOverShare {
		q.Preemption = api.PreemptNone
	}
	c.Queue = q
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if n.JobID == "" || seen[n.JobID] || r.IntN(8) == 0 {
			continue // a job the snapshot has no record of: nobody's
		}
		seen[n.JobID] = true
		c.Running = append(c.Running, Running{ID: n.JobID, Group: groups[r.IntN(len(groups))], Priority: r.IntN(3),
			Seq: int64(r.IntN(20)), Started: now.Add(-time.Duration(r.IntN(40)) * time.Minute),
			MinRuntime: time.Duration(r.IntN(2)) * 15 * time.Minute})
	}
	for i := range c.Queued {
		c.Queued[i].Group = groups[r.IntN(len(groups))]
	}
	if r.IntN(2) == 0 {
		c.Usage = map[string]Usage{}
		for _, g := range groups {
			c.Usage[g] = Usage{Value: float64(r.IntN(50)) * 3600, At: now.Add(-time.Duration(r.IntN(600)) * time.Minute), Held: r.IntN(3)}
		}
	}
	return c, now
}

func TestFairShareProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range propertyCases {
		c, now := randomFairCluster(r)
		before := cloneCluster(c)
		before.Running = slices.Clone(c.Running)
		p := Decide(c, now)
		if !reflect.DeepEqual(before, c) {
			t.Fatalf("case %d: Decide modified its input", i)
		}
		if err := checkInvariants(c, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
		if err := checkPreemptions(c, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s preempt %+v", i, err, c, now.Sub(t0), show(p), p.Preempt)
		}
		// The order is a permutation of the queue that keeps each group's
		// jobs in job order.
		order := Order(c, now)
		if got := slices.Sorted(slices.Values(order)); len(got) != len(c.Queued) || (len(got) > 0 && (got[0] != 0 || got[len(got)-1] != len(got)-1)) {
			t.Fatalf("case %d: order %v is not a permutation of %d jobs", i, order, len(c.Queued))
		}
		last := map[string]*Job{}
		for _, k := range order {
			j := &c.Queued[k]
			g := c.groupName(j.Group)
			if prev := last[g]; prev != nil && jobOrder(prev, j) > 0 {
				t.Fatalf("case %d: group %q's job %s comes after %s", i, g, prev.ID, j.ID)
			}
			last[g] = j
		}
	}
}

// checkPreemptions checks a plan's preemptions against the rules of
// fairshare.go.
func checkPreemptions(c Cluster, now time.Time, p Plan) error {
	if len(p.Preempt) == 0 {
		return nil
	}
	_, hi := limits(c)
	if c.Queue.Preemption == api.PreemptNone {
		return fmt.Errorf("preempted %v with preemption off", p.Preempt)
	}
	if p.Target < hi {
		return fmt.Errorf("preempted below maxNodeCount (target %d of %d)", p.Target, hi)
	}
	running := map[string]Running{}
	for _, r := range c.Running {
		running[r.ID] = r
	}
	queued := map[string]Job{}
	for _, j := range c.Queued {
		queued[j.ID] = j
	}
	freed := 0
	stopped := map[string]bool{}
	served := map[string]bool{}
	needs := 0
	for _, x := range p.Preempt {
		r, ok := running[x.Job]
		if !ok || stopped[x.Job] {
			return fmt.Errorf("preempted %s, not a running job or twice", x.Job)
		}
		stopped[x.Job] = true
		if now.Sub(r.Started) < max(r.MinRuntime, 0) || (r.MinRuntime == 0 && now.Sub(r.Started) < c.Queue.MinRuntime) {
			return fmt.Errorf("preempted %s after %v, within its minimum runtime", r.ID, now.Sub(r.Started))
		}
		w := queued[x.For]
		switch c.Queue.Preemption {
		case api.PreemptLowerPriority:
			if r.Priority >= w.Priority {
				return fmt.Errorf("preempted %s of priority %d for %s of priority %d", r.ID, r.Priority, w.ID, w.Priority)
			}
		case api.PreemptOverShare:
			if c.groupName(r.Group) == c.groupName(w.Group) {
				return fmt.Errorf("preempted %s for %s of its own group", r.ID, w.ID)
			}
		}
		for _, n := range c.Nodes {
			if n.JobID == r.ID && n.State == NodeRunning {
				freed++
			}
		}
		if !served[w.ID] {
			served[w.ID] = true
			needs += need(&w)
		}
	}
	busy := len(newView(c).busy)
	for _, a := range p.Assign {
		busy += len(a.NodeIDs)
	}
	// Never for jobs that would not then fit: the nodes freed and ready
	// cover every job the preemptions are for.
	if ready := max(p.Target-busy, 0); freed+ready < needs {
		return fmt.Errorf("preempted jobs free %d nodes, %d ready, for jobs that need %d", freed, ready, needs)
	}
	return nil
}

// replay runs a cluster of max nodes through Decide: jobs arrive as given,
// start as assigned, run for their duration, and go back to the queue when
// preempted (their nodes free at once). It returns when every job ended
// or at until.
type replay struct {
	c       Cluster
	now     time.Time
	dur     map[string]time.Duration
	ends    map[string]time.Time // running job -> end
	started map[string][]time.Time
	stopped map[string][]time.Time
	waited  map[string]time.Duration // queued time so far
	since   map[string]time.Time     // queued since
	got     map[string]float64       // node-seconds per group
	arrive  []Job                    // in arrival order, Seq set; arrival at time arrivals[i]
	at      []time.Time
	loops   error
}

func newReplay(q api.Queue, nodes int) *replay {
	c := Cluster{Max: nodes, Headroom: -1, Queue: q, Usage: map[string]Usage{}}
	for i := range nodes {
		c.Nodes = append(c.Nodes, idleNode(fmt.Sprintf("n%03d", i), t0))
	}
	return &replay{c: c, now: t0, dur: map[string]time.Duration{}, ends: map[string]time.Time{}, started: map[string][]time.Time{},
		stopped: map[string][]time.Time{}, waited: map[string]time.Duration{}, since: map[string]time.Time{}, got: map[string]float64{}}
}

func (x *replay) submit(j Job, at time.Time, d time.Duration) {
	j.Seq = int64(len(x.arrive) + 1)
	x.arrive = append(x.arrive, j)
	x.at = append(x.at, at)
	x.dur[j.ID] = d
}

// held counts the nodes of each group's running jobs.
func (x *replay) held() map[string]int {
	h := map[string]int{}
	group := map[string]string{}
	for _, r := range x.c.Running {
		group[r.ID] = r.Group
	}
	for _, n := range x.c.Nodes {
		if n.JobID != "" {
			h[group[n.JobID]]++
		}
	}
	return h
}

// step advances to now: node time is counted, usage advanced, ended jobs
// free their nodes, arrivals queue.
func (x *replay) step(now time.Time) {
	dt := now.Sub(x.now).Seconds()
	for g, n := range x.held() {
		x.got[g] += dt * float64(n)
	}
	x.now = now
	for id, end := range x.ends {
		if !end.After(now) {
			x.free(id)
			delete(x.ends, id)
		}
	}
	for len(x.arrive) > 0 && !x.at[0].After(now) {
		x.c.Queued = append(x.c.Queued, x.arrive[0])
		x.since[x.arrive[0].ID] = x.at[0]
		x.arrive, x.at = x.arrive[1:], x.at[1:]
	}
	h := x.held()
	for g := range x.c.Usage {
		if _, ok := h[g]; !ok {
			h[g] = 0
		}
	}
	for g, n := range h {
		x.c.Usage[g] = x.c.Usage[g].Advance(now, x.c.Queue.HalfLife, n)
	}
}

// free releases a running job's nodes and drops it from Running.
func (x *replay) free(id string) {
	for i := range x.c.Nodes {
		if x.c.Nodes[i].JobID == id {
			x.c.Nodes[i] = idleNode(x.c.Nodes[i].ID, x.now)
		}
	}
	x.c.Running = slices.DeleteFunc(x.c.Running, func(r Running) bool { return r.ID == id })
}

// decide makes one decision and applies it.
func (x *replay) decide() Plan {
	p := Decide(x.c, x.now)
	byID := map[string]Job{}
	for _, j := range x.c.Queued {
		byID[j.ID] = j
	}
	for _, v := range p.Preempt {
		minRun := x.c.Queue.MinRuntime
		if s := x.started[v.Job]; x.now.Sub(s[len(s)-1]) < minRun && x.loops == nil {
			x.loops = fmt.Errorf("job %s preempted %v after it started", v.Job, x.now.Sub(s[len(s)-1]))
		}
		if st := x.stopped[v.Job]; len(st) > 0 && x.now.Sub(st[len(st)-1]) < minRun && x.loops == nil {
			x.loops = fmt.Errorf("job %s preempted twice within %v", v.Job, minRun)
		}
		x.stopped[v.Job] = append(x.stopped[v.Job], x.now)
		var r Running
		for _, rr := range x.c.Running {
			if rr.ID == v.Job {
				r = rr
			}
		}
		x.free(v.Job)
		delete(x.ends, v.Job)
		x.c.Queued = append(x.c.Queued, Job{ID: r.ID, InstanceCount: 1, Seq: r.Seq, Group: r.Group, Priority: r.Priority})
		x.since[r.ID] = x.now
	}
	for _, a := range p.Assign {
		j := byID[a.JobID]
		for _, id := range a.NodeIDs {
			for i := range x.c.Nodes {
				if x.c.Nodes[i].ID == id {
					x.c.Nodes[i] = runningNode(id, j.ID, t0)
				}
			}
		}
		x.c.Running = append(x.c.Running, Running{ID: j.ID, Group: j.Group, Priority: j.Priority, Seq: j.Seq, Started: x.now})
		x.c.Queued = slices.DeleteFunc(x.c.Queued, func(q Job) bool { return q.ID == j.ID })
		x.ends[j.ID] = x.now.Add(x.dur[j.ID])
		x.started[j.ID] = append(x.started[j.ID], x.now)
		x.waited[j.ID] += x.now.Sub(x.since[j.ID])
	}
	return p
}

// run replays until every job ended or until; it returns the last time.
func (x *replay) run(until time.Time) {
	for x.now.Before(until) {
		p := x.decide()
		if len(p.Assign)+len(p.Preempt) > 0 {
			continue // decide again at the same time, as the controller does after a change
		}
		next := until
		for _, e := range x.ends {
			next = minTime(next, e)
		}
		if len(x.at) > 0 {
			next = minTime(next, x.at[0])
		}
		if !p.WakeAt.IsZero() {
			next = minTime(next, p.WakeAt)
		}
		if len(x.ends) == 0 && len(x.at) == 0 && len(x.c.Queued) == 0 {
			return
		}
		x.step(next)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func TestFairShareNeverStarvesAGroup(t *testing.T) {
	// Heavy groups keep 40 jobs each queued on 8 nodes; a light group
	// submits one job now and then. Under FIFO the light jobs wait behind
	// the backlog; under fair share each starts within a few job ends.
	r := rand.New(rand.NewPCG(7, 8))
	for _, policy := range []string{"fifo", "fair"} {
		q := fair("heavy1=3")
		if policy == "fifo" {
			q = api.Queue{}
		}
		x := newReplay(q, 8)
		k := 0
		for h := range 3 {
			for i := range 40 {
				k++
				x.submit(Job{ID: fmt.Sprintf("heavy%d-%d", h, i), InstanceCount: 1, Group: fmt.Sprintf("heavy%d", h)}, t0, time.Duration(20+r.IntN(40))*time.Minute)
			}
		}
		for i := range 6 {
			x.submit(Job{ID: fmt.Sprintf("light-%d", i), InstanceCount: 1, Group: "light"}, t0.Add(time.Duration(i)*90*time.Minute), 30*time.Minute)
		}
		x.run(t0.Add(100 * time.Hour))
		worst := time.Duration(0)
		for i := range 6 {
			id := fmt.Sprintf("light-%d", i)
			if len(x.started[id]) == 0 {
				t.Fatalf("%s: job %s never started", policy, id)
			}
			worst = max(worst, x.waited[id])
		}
		t.Logf("%s: the light group's longest wait %v", policy, worst)
		// Jobs end about every 5 minutes (8 nodes, 40-minute jobs): one of
		// the next ends serves the light group.
		if policy == "fair" && worst > 30*time.Minute {
			t.Errorf("fair share: a light job waited %v behind heavy backlogs", worst)
		}
		if policy == "fifo" && worst < 2*time.Hour {
			t.Errorf("FIFO: the light group waited only %v; the test does not build a backlog", worst)
		}
	}
}

func TestFairShareHonoursWeights(t *testing.T) {
	// Three backlogged groups of weights 1, 2 and 3 on 12 nodes: over a
	// day each receives node time in proportion to its weight.
	r := rand.New(rand.NewPCG(9, 10))
	x := newReplay(fair("b=2", "c=3"), 12)
	for i := range 400 {
		for _, g := range []string{"a", "b", "c"} {
			x.submit(Job{ID: fmt.Sprintf("%s%d", g, i), InstanceCount: 1, Group: g}, t0, time.Duration(10+r.IntN(50))*time.Minute)
		}
	}
	x.run(t0.Add(24 * time.Hour)) // every group has work left
	total := x.got["a"] + x.got["b"] + x.got["c"]
	for g, w := range map[string]float64{"a": 1, "b": 2, "c": 3} {
		if share := x.got[g] / total; math.Abs(share-w/6) > 0.03 {
			t.Errorf("group %s (weight %v) received %.3f of the node time, want %.3f", g, w, share, w/6)
		}
	}
}

func TestPreemptionHasNoLoops(t *testing.T) {
	// Two groups take turns submitting bursts onto 6 nodes with
	// preemption on: a job is never stopped within its minimum runtime of
	// its start, never twice within it, and every job completes.
	for _, mode := range []string{api.PreemptOverShare, api.PreemptLowerPriority} {
		r := rand.New(rand.NewPCG(11, 12))
		q := fair("a=2")
		q.Preemption, q.MinRuntime = mode, 10*time.Minute
		x := newReplay(q, 6)
		for burst := range 12 {
			g := []string{"a", "b", "c"}[burst%3]
			for i := range 6 {
				x.submit(Job{ID: fmt.Sprintf("%s%d-%d", g, burst, i), InstanceCount: 1 + r.IntN(2), Group: g, Priority: r.IntN(3)},
					t0.Add(time.Duration(burst)*25*time.Minute), time.Duration(5+r.IntN(60))*time.Minute)
			}
		}
		x.run(t0.Add(200 * time.Hour))
		if x.loops != nil {
			t.Errorf("%s: %v", mode, x.loops)
		}
		stops := 0
		for _, s := range x.stopped {
			stops += len(s)
		}
		if stops == 0 {
			t.Errorf("%s: nothing was preempted; the test does not exercise preemption", mode)
		}
		if len(x.c.Queued)+len(x.ends)+len(x.arrive) > 0 {
			t.Errorf("%s: jobs left: %d queued, %d running", mode, len(x.c.Queued), len(x.ends))
		}
		t.Logf("%s: %d preemptions", mode, stops)
	}
}
