package decide

import (
	"math"
	"slices"
	"time"
)

// IdlePolicy decides when idle scale-down may remove each idle node of a
// cluster, in place of the fixed IdleSince+IdleTimeout. Idle scale-down
// still takes nodes longest idle first, never below the floor and never
// one that the queue would use: a node goes once its time has come and
// every node idle longer than it has gone.
type IdlePolicy interface {
	// RemovableAt returns the time from which idle scale-down may remove
	// the idle node n. rank is how many idle nodes new work would take
	// before n (0: n gets the next job, since the scheduler takes the most
	// recently idle first), not counting idle nodes kept for the queue.
	// The answer must depend only on n, rank and the policy's own data,
	// never on the time of the decision: Plan.WakeAt relies on that.
	RemovableAt(n *Node, rank int) time.Time
}

// idleDeadline is when idle scale-down may remove n: the policy's answer,
// or IdleSince+timeout without one.
func idleDeadline(p IdlePolicy, n *Node, rank int, timeout time.Duration) time.Time {
	if p == nil {
		return n.IdleSince.Add(timeout)
	}
	return p.RemovableAt(n, rank)
}

// AdaptiveOptions tune AdaptiveIdle.
type AdaptiveOptions struct {
	// DelayWeight is what one second of a job's queue delay is worth, in
	// seconds of node time: 0 minimizes cost alone, higher values keep
	// nodes longer to start more jobs at once. It is the least weight: the
	// policy raises it while jobs find no idle node more often than under
	// the fixed timeout (except from 0). Negative counts as 0.
	DelayWeight float64
	// MinSamples is how many arrival instants the history needs before the
	// policy trusts it (with fewer, the fixed timeout applies), and how
	// many reference points a rank and silence need before a node is kept.
	// At least 1.
	MinSamples int
	// Provisioning is the provisioning delay assumed until one has been
	// observed.
	Provisioning time.Duration
	// MaxIdle caps how long a node is kept; 0: no cap.
	MaxIdle time.Duration
	// Window is how many demand events (distinct times) IdleHistory
	// remembers; <= 0: 1024.
	Window int
}

// DefaultAdaptive returns the default options. DelayWeight 3.25 was chosen
// with the trace simulator (docs/benchmarks.md): with it the policy starts
// jobs at least as fast as a fixed 120 s timeout on the whole Philly trace
// and on the synthetic bursty and diurnal traces, with less idle time.
func DefaultAdaptive() AdaptiveOptions {
	return AdaptiveOptions{DelayWeight: 3.25, MinSamples: 16, Provisioning: 3 * time.Minute}
}

// AdaptiveIdle is an IdlePolicy that keeps each idle node as long as the
// cluster's recent demand makes it worth it, instead of one fixed timeout.
//
// Keeping an idle node costs its price while it waits. If work comes for it
// before it goes, no node has to be created for that work (a new node is
// billed for the provisioning delay D before it does anything) and the work
// does not wait: without the idle node it would wait until a running job
// releases a node or the new node is ready, W = E[min(time to the next
// release, D)] on average. So keeping a node K more seconds is worth
//
//	P(work comes for it within K)·(D + w·W) − E[min(time until work comes for it, K)]
//
// node-seconds, where w is DelayWeight. For each node the policy takes the K
// that maximizes this under the empirical distribution of the cluster's
// recent demand, and 0 when no K gains anything:
//
//   - the history is the recent node arrivals (a job of n nodes is n
//     arrivals at its submission) and node releases (n nodes that become
//     idle when a job of n nodes ends);
//   - the scheduler gives work to the most recently idle node first, so the
//     node of rank r gets work when, counting from now, node arrivals
//     outnumber node releases by r+1: each release puts a node ahead of it;
//   - "now" is the later of the node's IdleSince and the last event of the
//     history, s after the last arrival. Every past arrival instant that no
//     other arrival followed within s is a reference point; from s after
//     it, the time until arrivals outnumber releases by r+1 is one sample,
//     right-censored at the end of the history. The distribution is the
//     Kaplan–Meier estimate. Conditioning on the silence s is what makes
//     the policy adaptive: after a burst more work is likely soon, after a
//     long lull it is not;
//   - the node may go at "now" + K, a time that moves only when the history
//     does (each new event is a new decision).
//
// With bursty arrivals the chance of more work fades as a silence grows, so
// nodes are kept through bursts and released in lulls; the nodes at the
// back of a large idle pool, which only a burst would use, go first; and
// when jobs end about as fast as new ones come, idle nodes are rarely
// needed and go soon. With fewer than MinSamples arrival instants in the
// history, the fixed timeout applies; a rank and silence with fewer than
// MinSamples reference points is not kept.
//
// The policy holds itself to the fixed timeout it replaces: the history
// counts the jobs that found no idle node (Arrive's idle), and replays the
// same demand under the fixed timeout (fixedPool) to count the jobs that
// would have found none there. While the first count is ahead of the
// second, the delay weight doubles for every 4 jobs it is ahead, and a
// rank and silence with too few reference points keeps the node as long as
// the fixed timeout would. So a cluster whose demand the model reads badly
// (sparse, or arrivals that follow job ends rather than other arrivals)
// does not wait more than under the fixed timeout for long; one it reads
// well keeps DelayWeight.
//
// An AdaptiveIdle reads its IdleHistory as it is: what the history learns
// changes its answers. Neither is safe for concurrent use.
type AdaptiveIdle struct {
	h        *IdleHistory
	fallback time.Duration
	opt      AdaptiveOptions
	// Derived from h at version: the value of a reuse (D + w·W, seconds)
	// and the answers given.
	version uint64
	value   float64
	cache   map[keepKey]time.Duration
	scratch []int64
}

type keepKey struct {
	rank    int
	silence int64
}

// DemandEvent is what happened to a cluster's demand at one time: nodes
// asked for by jobs submitted, and nodes released by jobs that ended.
type DemandEvent struct {
	At       time.Time
	Arrived  int
	Released int
}

// NewAdaptiveIdle builds the policy from a cluster's recent demand events
// (any order), the provisioning delay it has observed (<= 0:
// opt.Provisioning) and the fixed timeout that applies while the history is
// too short.
func NewAdaptiveIdle(events []DemandEvent, provisioning, fallback time.Duration, opt AdaptiveOptions) *AdaptiveIdle {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(x, y DemandEvent) int { return x.At.Compare(y.At) })
	h := &IdleHistory{Window: max(len(events), 1)}
	for _, e := range events {
		h.add(e.At, max(e.Arrived, 0), max(e.Released, 0))
	}
	if provisioning > 0 {
		h.Provisioned(provisioning)
	}
	return h.Policy(fallback, opt)
}

// refresh derives the value of a reuse from the history, once per change.
func (a *AdaptiveIdle) refresh() {
	h := a.h
	if a.cache != nil && a.version == h.version {
		return
	}
	if a.cache == nil {
		a.cache = map[keepKey]time.Duration{}
	}
	clear(a.cache)
	a.version = h.version
	d := h.provisioning()
	a.value = d.Seconds() + a.weight()*h.waitSaved(d).Seconds()
}

// weight is the delay weight in force: DelayWeight, doubled for every
// feedbackScale jobs that found no idle node beyond those that would not
// have found one under the fixed timeout on the same demand, up to
// DelayWeight·1024. A weight of 0 (cost alone) stays 0.
func (a *AdaptiveIdle) weight() float64 {
	w := a.opt.DelayWeight
	if w == 0 {
		return 0
	}
	excess := float64(a.h.missed-a.h.ref.missed) / feedbackScale
	return w * math.Exp2(min(max(excess, 0), 10))
}

// feedbackScale is how many jobs, missed beyond the fixed timeout's misses,
// double the delay weight.
const feedbackScale = 4

// RemovableAt implements IdlePolicy.
func (a *AdaptiveIdle) RemovableAt(n *Node, rank int) time.Time {
	h := a.h
	if h.arrivals() < a.opt.MinSamples {
		return n.IdleSince.Add(a.fallback)
	}
	now := h.at[len(h.at)-1] // the last event
	if t := int64(n.IdleSince.Sub(h.origin)); t > now {
		now = t
	}
	keep := a.Keep(max(rank, 0), time.Duration(now-h.at[h.lastArr]))
	if keep < 0 {
		return n.IdleSince.Add(a.fallback)
	}
	return h.origin.Add(time.Duration(now) + keep)
}

// Keep is how long the policy keeps an idle node of the given rank, counted
// from a time silence after the last arrival of the history.
func (a *AdaptiveIdle) Keep(rank int, silence time.Duration) time.Duration {
	a.refresh()
	key := keepKey{rank, int64(silence)}
	if k, ok := a.cache[key]; ok {
		return k
	}
	h := a.h
	sil := int64(silence)
	end := h.at[len(h.at)-1]
	// Samples: x<<1, plus 1 when censored, so that a plain sort puts
	// events before censorings at the same time.
	xs := a.scratch[:0]
	s := h.start // the first event after start, advanced as refs go on
	for _, i := range h.refs[h.refsStart:] {
		t := h.at[i]
		if next := h.nextArr[i]; next >= 0 && next-t <= sil {
			continue // an arrival broke a silence this long
		}
		start := t + sil
		if start >= end {
			continue // nothing was seen after it
		}
		// The first event after start, then the first event from there
		// at which arrivals outnumber releases by rank+1.
		s = max(s, i+1)
		for h.at[s] <= start {
			s++
		}
		if k := h.tree.first(s, h.cum[s-1]+rank+1); k >= 0 {
			xs = append(xs, (h.at[k]-start)<<1)
		} else {
			xs = append(xs, (end-start)<<1|1)
		}
	}
	a.scratch = xs
	var keep time.Duration
	switch {
	case len(xs) >= a.opt.MinSamples:
		keep = bestKeep(xs, a.value)
	case a.h.missed > a.h.ref.missed:
		keep = -1 // too few to tell, and behind: the fixed timeout
	}
	if a.opt.MaxIdle > 0 && keep >= 0 {
		keep = min(keep, a.opt.MaxIdle)
	}
	a.cache[key] = keep
	return keep
}

// bestKeep returns the K among 0 and the observed sample times that
// maximizes value·F(K) − ∫₀ᴷ S(t) dt, where S = 1 − F is the Kaplan–Meier
// survival of the samples (the integral is E[min(x, K)]); value is in
// seconds. A sample is its time in nanoseconds shifted left by one, plus 1
// when censored. It sorts xs.
func bestKeep(xs []int64, value float64) time.Duration {
	slices.Sort(xs)
	atRisk := float64(len(xs))
	surv, area, prev := 1.0, 0.0, int64(0)
	var best float64
	var keep int64
	for _, p := range xs {
		x := p >> 1
		area += surv * float64(x-prev) / 1e9
		prev = x
		if p&1 == 0 {
			surv *= 1 - 1/atRisk
			if gain := value*(1-surv) - area; gain > best {
				best, keep = gain, x
			}
		}
		atRisk--
	}
	return time.Duration(keep)
}

// maxTree answers "the first index from lo whose value is at least v" in
// O(log n) over an array of ints, with point updates in O(log n).
type maxTree struct {
	size int   // leaves, a power of two
	t    []int // t[1] is the root; the leaves start at t[size]
}

// reset makes the tree hold vals, with room for size leaves.
func (m *maxTree) reset(vals []int, size int) {
	m.size = 1
	for m.size < max(size, len(vals)) {
		m.size *= 2
	}
	m.t = slices.Grow(m.t[:0], 2*m.size)[:2*m.size]
	leaves := m.t[m.size:]
	copy(leaves, vals)
	for i := len(vals); i < len(leaves); i++ {
		leaves[i] = math.MinInt
	}
	for i := m.size - 1; i >= 1; i-- {
		m.t[i] = max(m.t[2*i], m.t[2*i+1])
	}
}

// set changes the value at i.
func (m *maxTree) set(i, v int) {
	i += m.size
	m.t[i] = v
	for i > 1 {
		i /= 2
		m.t[i] = max(m.t[2*i], m.t[2*i+1])
	}
}

// first returns the smallest i >= lo with value >= v, or -1.
func (m *maxTree) first(lo, v int) int {
	if lo < 0 || lo >= m.size {
		return -1
	}
	i := lo + m.size
	for m.t[i] < v {
		// Climb while i is a right child, then move to the subtree on
		// its right.
		for i&1 == 1 {
			i /= 2
			if i == 0 {
				return -1
			}
		}
		i++
	}
	for i < m.size {
		i *= 2
		if m.t[i] < v {
			i++
		}
	}
	return i - m.size
}

// IdleHistory gathers what AdaptiveIdle learns from as a cluster runs: its
// recent demand events and the provisioning delays it has observed. The
// zero value is ready to use. Recording an event costs O(log Window)
// amortized.
type IdleHistory struct {
	// Window is how many demand events (distinct times) are remembered;
	// <= 0: 1024. Set it before the first event.
	Window int

	origin    time.Time // times below are nanoseconds since origin
	at        []int64   // event times, ascending and distinct; the window is [start:]
	arrivedN  []int     // per event: nodes asked for
	cum       []int     // per event: node arrivals minus releases up to and including it
	nextArr   []int64   // per event: the next arrival after it; -1 if none yet
	released  []bool    // per event: were nodes released
	refs      []int     // events with arrivals; the window's are [refsStart:]
	refsStart int
	start     int
	lastArr   int // the last event with arrivals; -1 if none
	tree      maxTree
	delays    [16]time.Duration // ring of observed provisioning delays
	nd        int
	version   uint64
	policy    AdaptiveIdle
	// Node arrivals that found no idle node, and the same demand under
	// the fixed timeout (the policy's fallback).
	missed int
	ref    fixedPool
}

func (h *IdleHistory) window() int {
	if h.Window <= 0 {
		return 1024
	}
	return h.Window
}

// add records an event; events come in time order (an earlier one counts
// at the time of the last).
func (h *IdleHistory) add(t time.Time, arrived, released int) {
	if arrived == 0 && released == 0 {
		return
	}
	h.version++
	if len(h.at) == 0 {
		h.origin, h.lastArr = t, -1
	}
	ts := max(int64(t.Sub(h.origin)), 0)
	k := len(h.at) - 1
	if k < h.start || h.at[k] < ts {
		if len(h.at) == 2*h.window() {
			h.compact()
			k = len(h.at) - 1
		}
		prev := 0
		if k >= 0 {
			prev = h.cum[k]
		}
		h.at = append(h.at, ts)
		h.arrivedN = append(h.arrivedN, 0)
		h.cum = append(h.cum, prev)
		h.nextArr = append(h.nextArr, -1)
		h.released = append(h.released, false)
		k++
		if len(h.at)-h.start > h.window() {
			h.start++
			for h.refsStart < len(h.refs) && h.refs[h.refsStart] < h.start {
				h.refsStart++
			}
		}
		if h.tree.size < len(h.at) {
			h.tree.reset(h.cum, 2*h.window())
		}
	}
	if arrived > 0 && h.arrivedN[k] == 0 {
		// The events since the previous arrival learn their next one.
		for j := max(h.lastArr, h.start); j < k; j++ {
			h.nextArr[j] = h.at[k]
		}
		h.refs = append(h.refs, k)
		h.lastArr = k
	}
	h.arrivedN[k] += arrived
	h.released[k] = h.released[k] || released > 0
	h.cum[k] += arrived - released
	h.tree.set(k, h.cum[k])
}

// compact drops the events before the window, keeping the memory.
func (h *IdleHistory) compact() {
	s := h.start
	h.at = append(h.at[:0], h.at[s:]...)
	h.arrivedN = append(h.arrivedN[:0], h.arrivedN[s:]...)
	h.cum = append(h.cum[:0], h.cum[s:]...)
	h.nextArr = append(h.nextArr[:0], h.nextArr[s:]...)
	h.released = append(h.released[:0], h.released[s:]...)
	refs := h.refs[h.refsStart:]
	for i := range refs {
		refs[i] -= s
	}
	h.refs = append(h.refs[:0], refs...)
	h.refsStart, h.start = 0, 0
	h.lastArr -= s
	h.tree.reset(h.cum, 2*h.window())
}

// arrivals is how many arrival instants the window holds.
func (h *IdleHistory) arrivals() int { return len(h.refs) - h.refsStart }

// Arrive records a job of nodes nodes (at least 1) submitted at t, when the
// cluster had idle idle nodes it could start on at once: the policy
// compares how often work finds no idle node with how often it would under
// the fixed timeout (the fallback of the last Policy call: call Policy
// before recording), and keeps nodes longer while it misses more.
func (h *IdleHistory) Arrive(t time.Time, nodes, idle int) {
	nodes = max(nodes, 1)
	h.add(t, nodes, 0)
	if idle < nodes {
		h.missed++
	}
	h.ref.arrive(h.ts(t), nodes, int64(h.policy.fallback), int64(h.provisioning()))
}

// Release records nodes nodes that became idle at t because their job
// ended (not nodes that just finished provisioning).
func (h *IdleHistory) Release(t time.Time, nodes int) {
	if nodes <= 0 {
		return
	}
	h.add(t, 0, nodes)
	h.ref.release(h.ts(t), nodes, int64(h.policy.fallback))
}

// ts is t in nanoseconds since the history's origin, never before the last
// event.
func (h *IdleHistory) ts(t time.Time) int64 {
	if len(h.at) == 0 {
		return 0
	}
	return max(int64(t.Sub(h.origin)), h.at[len(h.at)-1])
}

// Missed returns how many node arrivals found no idle node, and how many
// would have under the fixed timeout on the same demand.
func (h *IdleHistory) Missed() (missed, fixed int) { return h.missed, h.ref.missed }

// provisioning is the provisioning delay observed, or the policy's
// assumption before any.
func (h *IdleHistory) provisioning() time.Duration {
	if d := h.Provisioning(); d > 0 {
		return d
	}
	return h.policy.opt.Provisioning
}

// Provisioned records that a node took d from request to ready.
func (h *IdleHistory) Provisioned(d time.Duration) {
	h.delays[h.nd%len(h.delays)] = d
	h.nd++
	h.version++
}

// Provisioning is the mean of the recent provisioning delays observed; 0 if
// none.
func (h *IdleHistory) Provisioning() time.Duration {
	n := min(h.nd, len(h.delays))
	if n == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range h.delays[:n] {
		sum += d
	}
	return sum / time.Duration(n)
}

// waitSaved is how long work that finds no idle node waits on average: until
// a running job releases a node or the provisioning delay d has passed,
// whichever comes first (the mean over the window's arrival instants).
func (h *IdleHistory) waitSaved(d time.Duration) time.Duration {
	if h.arrivals() == 0 {
		return d
	}
	var sum time.Duration
	end := h.at[len(h.at)-1]
	nextRel := int64(-1) // the next release after the event looked at
	for k := len(h.at) - 1; k >= h.start; k-- {
		if h.arrivedN[k] > 0 {
			y := end - h.at[k] // censored: what was seen
			if nextRel >= 0 {
				y = nextRel - h.at[k]
			}
			sum += min(time.Duration(y), d)
		}
		if h.released[k] {
			nextRel = h.at[k]
		}
	}
	return sum / time.Duration(h.arrivals())
}

// Policy returns the adaptive policy over this history. The history owns
// it; it reads the history as it is when asked.
func (h *IdleHistory) Policy(fallback time.Duration, opt AdaptiveOptions) *AdaptiveIdle {
	opt.DelayWeight = max(opt.DelayWeight, 0)
	opt.MinSamples = max(opt.MinSamples, 1)
	fallback = max(fallback, 0)
	p := &h.policy
	if p.h != h || p.fallback != fallback || p.opt != opt {
		p.h, p.fallback, p.opt = h, fallback, opt
		p.cache = nil // recompute
	}
	return p
}
