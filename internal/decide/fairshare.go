package decide

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Fair share and preemption: Cluster.Queue.
//
// # Order (fair share)
//
// Jobs are grouped (Job.Group: the submitting principal, or a tag's
// value). A group's standing is its key, (held + recent) / weight: the
// nodes its running jobs hold now, plus its decayed usage read as the
// nodes it held on average lately (Usage.Recent), over its weight. The
// queue is taken group by group: the next job is the first (by priority,
// then submission) of the group with the lowest key, which then counts
// the job's nodes as held; ties go to the job that comes first by
// priority, submission and ID. So within a pass the groups take turns,
// and a group that used much lately waits for those that did not. Jobs
// too big for the cluster hold nothing. Scheduling keeps its reservation
// rule over this order: the first job that does not fit reserves the idle
// nodes, so a gang job is not starved by smaller jobs behind it, of its
// group or another.
//
// # Shares
//
// A group's share is its weighted part of maxNodeCount among the groups
// that hold or want nodes, never more than it holds and wants (max-min
// fair: what a group does not want goes to the others by weight).
//
// # Preemption
//
// With Queue.Preemption set, after the plan: the queue is walked in
// order, the nodes ready after the plan (idle, being prepared or created,
// those of jobs already stopping) serving each job in turn. The first job
// W that they cannot serve while the cluster is at maxNodeCount (and not
// shrinking) may stop running jobs:
//
//   - LowerPriority: jobs of lower priority than W's, the lowest first,
//     then the newest (the least work lost);
//   - OverShare (fair share): when W's group holds less than its share,
//     jobs of groups over their share, the group with the highest key
//     first, then its newest job; a job is taken only while its group,
//     without it, still stands no lower than W's group with W (so the
//     stopped job cannot win its nodes back: no loop between two groups).
//
// A job is stopped only once it has run its minimum runtime in its
// current attempt (its own, Running.MinRuntime, or the policy's); a job
// stopped and started again is protected anew, so no job is stopped twice
// within its minimum runtime. Jobs are stopped only when they free enough
// nodes for W: never for a job that would not then fit. The walk then
// goes on to the next job with W's nodes counted; it stops at the first
// job it cannot serve. When only the minimum runtime holds a preemption
// back, the plan wakes when the first candidate reaches it. Preemption is
// off on image-bound clusters (a node freed runs another image).
//
// # Why jobs wait (fair share)
//
// Every group with a job that neither starts nor is served by the ready
// nodes (nor by a preemption) gets a BlockShare: its nodes, share and
// recent usage, so its jobs say where the group stands.

// Running is a job that holds nodes of the cluster; its nodes name it.
type Running struct {
	ID       string
	Name     string // what a reason calls it; ID when ""
	Group    string
	Priority int
	Seq      int64
	// Started is when its current attempt was given its nodes.
	Started time.Time
	// MinRuntime is its own minimum runtime; 0 takes the policy's.
	MinRuntime time.Duration
}

// GroupState is where a fair-share group stands in a snapshot.
type GroupState struct {
	Name        string
	Weight      float64
	Held        int     // nodes its running jobs hold
	Usage       float64 // decayed node-seconds
	Recent      float64 // Usage as nodes held on average lately
	Share       float64 // the nodes it is entitled to
	QueuedJobs  int     // its queued jobs in the snapshot
	QueuedNodes int     // the nodes they need (those that fit)
}

// group is one fair-share group while a decision is made.
type group struct {
	GroupState
	fitting int   // its queued jobs that fit under maxNodeCount
	demand  int   // held + queued nodes
	walk    int   // held while the queue is walked
	jobs    []int // its queued jobs (indices into Cluster.Queued) in job order
	next    int   // the next of jobs in the walk
}

// key is the group's standing with held nodes: lower goes first.
func (g *group) key(held int) float64 { return (float64(held) + g.Recent) / g.Weight }

// shares is the fair-share state of a snapshot.
type shares struct {
	c       *Cluster
	groups  []*group // by name
	byName  map[string]*group
	last    *group               // the group get found last
	running map[string]*runShare // running job ID -> its nodes
	stopped map[string]bool
}

// runShare is what a running job holds.
type runShare struct {
	group *group
	nodes int // its nodes that free up when it stops (running)
	held  int // its nodes that its group holds
}

// groupName is job j's group under the policy: one group under FIFO.
func (c *Cluster) groupName(g string) string {
	if !c.Queue.FairShare {
		return ""
	}
	return g
}

func newShares(c *Cluster, now time.Time) *shares {
	_, hi := limits(*c)
	s := &shares{c: c, byName: map[string]*group{}, running: make(map[string]*runShare, len(c.Running)), stopped: map[string]bool{}}
	runs := make([]runShare, len(c.Running))
	for i := range c.Running {
		r := &c.Running[i]
		runs[i].group = s.get(c.groupName(r.Group))
		s.running[r.ID] = &runs[i]
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.JobID == "" || n.State == NodePreempted || n.State == NodeUnusable {
			continue
		}
		r := s.running[n.JobID]
		if r == nil {
			continue
		}
		r.held++
		r.group.Held++
		if n.State == NodeRunning {
			r.nodes++
		}
	}
	for k := range c.Queued {
		j := &c.Queued[k]
		g := s.get(c.groupName(j.Group))
		g.jobs = append(g.jobs, k)
		g.QueuedJobs++
		if n := need(j); n <= hi {
			g.QueuedNodes += n
			g.fitting++
		}
	}
	q := c.Queue
	for _, g := range s.groups {
		g.Weight = 1
		if q.FairShare {
			g.Weight = q.Weight(g.Name)
			u := c.Usage[g.Name]
			g.Usage = u.Now(now, q.HalfLife)
			g.Recent = u.Recent(now, q.HalfLife)
		}
		g.demand = g.Held + g.QueuedNodes
		g.walk = g.Held
		if !slices.IsSortedFunc(g.jobs, s.jobOrder) {
			slices.SortFunc(g.jobs, s.jobOrder)
		}
	}
	slices.SortFunc(s.groups, func(a, b *group) int { return strings.Compare(a.Name, b.Name) })
	s.fill(hi)
	return s
}

func (s *shares) jobOrder(a, b int) int { return jobOrder(&s.c.Queued[a], &s.c.Queued[b]) }

func (s *shares) get(name string) *group {
	if s.last != nil && s.last.Name == name {
		return s.last // jobs of a group often come together
	}
	g := s.byName[name]
	if g == nil {
		g = &group{GroupState: GroupState{Name: name}}
		s.byName[name] = g
		s.groups = append(s.groups, g)
	}
	s.last = g
	return g
}

// fill sets each group's share of capacity nodes (MaxMinShares).
func (s *shares) fill(capacity int) {
	demands := make([]int, len(s.groups))
	weights := make([]float64, len(s.groups))
	for i, g := range s.groups {
		demands[i], weights[i] = g.demand, g.Weight
	}
	for i, share := range MaxMinShares(capacity, demands, weights) {
		s.groups[i].Share = share
	}
}

// MaxMinShares divides capacity nodes among groups that want demands[i]
// nodes with weights[i] (> 0): weighted max-min fair, so a group gets no
// more than it wants, and what it does not want goes to the others by
// weight. A group that wants nothing gets nothing.
func MaxMinShares(capacity int, demands []int, weights []float64) []float64 {
	out := make([]float64, len(demands))
	var idx []int
	wsum := 0.0
	for i, d := range demands {
		if d > 0 {
			idx = append(idx, i)
			wsum += weights[i]
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(float64(demands[a])/weights[a], float64(demands[b])/weights[b])
	})
	left := float64(capacity)
	for k, i := range idx {
		if fair := left * weights[i] / wsum; float64(demands[i]) <= fair {
			out[i] = float64(demands[i])
			left -= out[i]
			wsum -= weights[i]
			continue
		}
		for _, j := range idx[k:] {
			out[j] = left * weights[j] / wsum
		}
		break
	}
	return out
}

// order returns indices of c.Queued in the fair-share order (see the top
// of the file), from the groups' holdings, until the jobs that fit under
// maxNodeCount need more than limit nodes in all (limit < 0: every job).
// It moves the groups' walk holdings along.
func (s *shares) order(limit int) []int {
	c := s.c
	_, hi := limits(*c)
	out := make([]int, 0, min(len(c.Queued), max(limit+1, 16)))
	if limit < 0 {
		out = make([]int, 0, len(c.Queued))
	}
	h := groupHeap{s: s}
	for _, g := range s.groups {
		g.next, g.walk = 0, g.Held
		if len(g.jobs) > 0 {
			h.push(g)
		}
	}
	total := 0
	for len(h.gs) > 0 && (limit < 0 || total <= limit) {
		g := h.pop()
		k := g.jobs[g.next]
		out = append(out, k)
		if n := need(&c.Queued[k]); n <= hi {
			g.walk += n
			total += n
		}
		if g.next++; g.next < len(g.jobs) {
			h.push(g)
		}
	}
	return out
}

// groupHeap is a binary min-heap of groups by key, then their next job.
type groupHeap struct {
	s  *shares
	gs []*group
}

func (h *groupHeap) less(a, b *group) bool {
	if ka, kb := a.key(a.walk), b.key(b.walk); ka != kb {
		return ka < kb
	}
	if c := h.s.jobOrder(a.jobs[a.next], b.jobs[b.next]); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}

func (h *groupHeap) push(g *group) {
	h.gs = append(h.gs, g)
	for i := len(h.gs) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(h.gs[i], h.gs[p]) {
			break
		}
		h.gs[i], h.gs[p] = h.gs[p], h.gs[i]
		i = p
	}
}

func (h *groupHeap) pop() *group {
	top := h.gs[0]
	last := len(h.gs) - 1
	h.gs[0] = h.gs[last]
	h.gs = h.gs[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.gs) && h.less(h.gs[l], h.gs[m]) {
			m = l
		}
		if r < len(h.gs) && h.less(h.gs[r], h.gs[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.gs[i], h.gs[m] = h.gs[m], h.gs[i]
		i = m
	}
	return top
}

// orderOf returns the indices of c.Queued in scheduling order, far enough
// for every decision (the jobs that fit under maxNodeCount, until they
// need more than twice as many nodes): priority then submission, or fair
// share.
func orderOf(c Cluster, now time.Time) []int {
	if !c.Queue.FairShare {
		return queueOrder(c.Queued)
	}
	_, hi := limits(c)
	return newShares(&c, now).order(2*hi + 1)
}

// Order returns the indices of c.Queued in the order the scheduler takes
// them: by priority then submission, or in fair-share order (each job
// counted as started when its turn comes).
func Order(c Cluster, now time.Time) []int {
	if !c.Queue.FairShare {
		return queueOrder(c.Queued)
	}
	return newShares(&c, now).order(-1)
}

// Groups says where each fair-share group of the snapshot stands, by
// name; nil unless the policy is fair share.
func Groups(c Cluster, now time.Time) []GroupState {
	if !c.Queue.FairShare {
		return nil
	}
	s := newShares(&c, now)
	out := make([]GroupState, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, g.GroupState)
	}
	return out
}

// decideQueue adds to a plan what the queue policy decides beyond the
// order: the preemptions and, under fair share, why groups wait.
func decideQueue(c Cluster, p Plan, s *shares, now time.Time) Plan {
	_, hi := limits(c)
	order := s.order(2*hi + 1)
	placed := make(map[string]bool, len(p.Assign))
	busy := busyNodes(c)
	for _, a := range p.Assign {
		placed[a.JobID] = true
		busy += len(a.NodeIDs)
	}
	for _, g := range s.groups {
		g.walk = g.Held
	}
	for _, k := range order {
		if j := &c.Queued[k]; placed[j.ID] {
			g := s.byName[c.groupName(j.Group)]
			g.Held += need(j)
			g.walk = g.Held
		}
	}
	ready := max(p.Target-busy, 0)
	preempting := c.Queue.Preemption != api.PreemptNone && !c.ImageBound && p.Target >= hi && len(p.Drain) == 0 && busy <= hi
	served := map[*group]int{} // jobs started or served by nodes on their way
	for _, k := range order {
		j := &c.Queued[k]
		n := need(j)
		g := s.byName[c.groupName(j.Group)]
		if placed[j.ID] {
			served[g]++
		}
		if placed[j.ID] || n > hi {
			continue
		}
		if n <= ready {
			ready -= n // served by nodes ready or on their way
			served[g]++
			continue
		}
		if !preempting {
			continue
		}
		victims, freed, wake := s.victims(j, n-ready, now)
		p.WakeAt = earliest(p.WakeAt, wake, now)
		if victims == nil {
			preempting = false // the first job that cannot be served holds the rest
			continue
		}
		p.Preempt = append(p.Preempt, victims...)
		ready += freed - n
		g.walk += n
		served[g]++
	}
	if c.Queue.FairShare {
		for _, g := range s.groups {
			if g.fitting > served[g] { // it has a job that waits
				p.Blocked = append(p.Blocked, api.Block{Kind: api.BlockShare, Group: g.Name, Nodes: g.Held,
					Share: tenth(g.Share), Recent: tenth(g.Recent)})
			}
		}
	}
	return p
}

// busyNodes counts the nodes the view would call busy.
func busyNodes(c Cluster) int {
	requeued := requeuedJobs(c)
	busy := 0
	for i := range c.Nodes {
		if classOf(&c.Nodes[i], requeued) == classBusy {
			busy++
		}
	}
	return busy
}

// tenth rounds to one decimal: reasons change only when their words do.
func tenth(x float64) float64 { return math.Round(x*10) / 10 }

// victims chooses running jobs to stop so that deficit more nodes free up
// for waiting job w (see the top of the file). It returns them, the nodes
// they free, and when a job held back only by its minimum runtime reaches
// it (zero: none); nil when they would not free enough.
func (s *shares) victims(w *Job, deficit int, now time.Time) (out []api.Preemption, freed int, wake time.Time) {
	c := s.c
	mode := c.Queue.Preemption
	gw := s.byName[c.groupName(w.Group)]
	if mode == api.PreemptOverShare && float64(gw.walk) >= gw.Share {
		return nil, 0, time.Time{} // its group is not under its share
	}
	n := need(w)
	type undo struct {
		g    *group
		held int
	}
	var undos []undo
	for freed < deficit {
		best := -1
		for i := range c.Running {
			r := &c.Running[i]
			if s.stopped[r.ID] || s.running[r.ID].nodes == 0 || !s.allowed(r, w, gw, n) {
				continue
			}
			if minRun := cmp.Or(r.MinRuntime, c.Queue.MinRuntime); now.Before(r.Started.Add(minRun)) {
				wake = earliest(wake, r.Started.Add(minRun), now)
				continue
			}
			if best < 0 || s.before(r, &c.Running[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := &c.Running[best]
		g := s.byName[c.groupName(r.Group)]
		out = append(out, api.Preemption{Kind: mode, Job: r.ID, JobName: r.Name, Priority: r.Priority, Group: g.Name, Nodes: g.walk,
			Share: tenth(g.Share), For: w.ID, ForName: w.Name, ForPriority: w.Priority, ForGroup: gw.Name, ForNodes: gw.walk, ForShare: tenth(gw.Share)})
		undos = append(undos, undo{g, g.walk})
		g.walk -= s.running[r.ID].held
		freed += s.running[r.ID].nodes
		s.stopped[r.ID] = true
	}
	if freed < deficit {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i].g.walk = undos[i].held
		}
		for _, v := range out {
			delete(s.stopped, v.Job)
		}
		return nil, 0, wake
	}
	return out, freed, time.Time{}
}

// allowed reports whether running job r may be stopped for waiting job w
// (of group gw, needing n nodes) under the policy's mode.
func (s *shares) allowed(r *Running, w *Job, gw *group, n int) bool {
	if s.c.Queue.Preemption == api.PreemptLowerPriority {
		return r.Priority < w.Priority
	}
	g := s.byName[s.c.groupName(r.Group)]
	return g != gw && float64(g.walk) > g.Share && g.key(g.walk-s.running[r.ID].held) >= gw.key(gw.walk+n)
}

// before reports whether running job a is a better victim than b: the
// lowest priority (LowerPriority) or the group furthest over its share
// (OverShare) first, then the newest.
func (s *shares) before(a, b *Running) bool {
	c := s.c
	if c.Queue.Preemption == api.PreemptLowerPriority {
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
	} else if ga, gb := s.byName[c.groupName(a.Group)], s.byName[c.groupName(b.Group)]; ga != gb {
		if ka, kb := ga.key(ga.walk), gb.key(gb.walk); ka != kb {
			return ka > kb
		}
		return ga.Name < gb.Name
	}
	if !a.Started.Equal(b.Started) {
		return a.Started.After(b.Started)
	}
	if a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	return a.ID < b.ID
}
