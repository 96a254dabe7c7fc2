package decide

import (
	"cmp"
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
	// nodes longer to start more jobs at once. Negative counts as 0.
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
// with the trace simulator (docs/benchmarks.md): it is where the policy
// starts jobs at least as fast as a fixed 120 s timeout on the Philly trace
// and on the synthetic bursty and diurnal traces, with 20 % to 75 % less
// idle time.
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
// AdaptiveIdle caches answers, so it is not safe for concurrent use.
type AdaptiveIdle struct {
	origin    time.Time // times below are nanoseconds since origin
	at        []int64   // event times, ascending and distinct
	arrivedN  []int     // per event: nodes asked for
	releasedN []int     // per event: nodes released
	refs      []int     // events with arrivals
	nextArr   []int64   // per event: the next arrival after it; -1 if none
	net       maxTree   // net[k]: node arrivals minus releases of events [0, k)
	lastArr   int64
	end       int64   // the last event
	value     float64 // D + w·W, in seconds
	fallback  time.Duration
	opt       AdaptiveOptions
	cache     map[keepKey]time.Duration
	scratch   []sample
	sums      []int
}

// DemandEvent is what happened to a cluster's demand at one time: nodes
// asked for by jobs submitted, and nodes released by jobs that ended.
type DemandEvent struct {
	At       time.Time
	Arrived  int
	Released int
}

type keepKey struct {
	rank    int
	silence int64
}

// sample is the time until a node would have got work; censored when the
// history ended first.
type sample struct {
	x        int64
	censored bool
}

// NewAdaptiveIdle builds the policy from a cluster's recent demand events
// (any order), the provisioning delay it has observed (<= 0:
// opt.Provisioning) and the fixed timeout that applies while the history is
// too short.
func NewAdaptiveIdle(events []DemandEvent, provisioning, fallback time.Duration, opt AdaptiveOptions) *AdaptiveIdle {
	a := &AdaptiveIdle{}
	a.reset(events, provisioning, fallback, opt)
	return a
}

// reset rebuilds a in place, reusing its memory.
func (a *AdaptiveIdle) reset(events []DemandEvent, provisioning, fallback time.Duration, opt AdaptiveOptions) {
	opt.DelayWeight = max(opt.DelayWeight, 0)
	opt.MinSamples = max(opt.MinSamples, 1)
	if provisioning <= 0 {
		provisioning = opt.Provisioning
	}
	a.fallback, a.opt = max(fallback, 0), opt
	if a.cache == nil {
		a.cache = map[keepKey]time.Duration{}
	}
	clear(a.cache)
	a.at, a.arrivedN, a.releasedN, a.refs, a.nextArr = a.at[:0], a.arrivedN[:0], a.releasedN[:0], a.refs[:0], a.nextArr[:0]
	byTime := func(x, y DemandEvent) int { return x.At.Compare(y.At) }
	if !slices.IsSortedFunc(events, byTime) {
		events = slices.Clone(events)
		slices.SortStableFunc(events, byTime)
	}
	// Merge the events of one instant; net sums arrivals minus releases.
	net := append(a.sums[:0], 0)
	for _, e := range events {
		arrived, released := max(e.Arrived, 0), max(e.Released, 0)
		if arrived == 0 && released == 0 {
			continue
		}
		if len(a.at) == 0 {
			a.origin = e.At
		}
		t := int64(e.At.Sub(a.origin))
		k := len(a.at) - 1
		if k < 0 || a.at[k] != t {
			a.at = append(a.at, t)
			a.arrivedN = append(a.arrivedN, 0)
			a.releasedN = append(a.releasedN, 0)
			net = append(net, net[len(net)-1])
			k++
		}
		net[k+1] += arrived - released
		if arrived > 0 && a.arrivedN[k] == 0 {
			a.refs = append(a.refs, k)
		}
		a.arrivedN[k] += arrived
		a.releasedN[k] += released
	}
	a.sums = net
	a.net.build(net)
	a.value = provisioning.Seconds()
	if len(a.at) == 0 {
		return
	}
	a.end = a.at[len(a.at)-1]
	a.nextArr = slices.Grow(a.nextArr, len(a.at))[:len(a.at)]
	next := int64(-1)
	for k := len(a.at) - 1; k >= 0; k-- {
		a.nextArr[k] = next
		if a.arrivedN[k] > 0 {
			next = a.at[k]
		}
	}
	if len(a.refs) > 0 {
		a.lastArr = a.at[a.refs[len(a.refs)-1]]
	}
	a.value += opt.DelayWeight * a.waitSaved(provisioning).Seconds()
}

// waitSaved is how long work that finds no idle node waits on average: until
// a running job releases a node or the provisioning delay d has passed,
// whichever comes first (the mean over the history's arrival instants).
func (a *AdaptiveIdle) waitSaved(d time.Duration) time.Duration {
	if len(a.refs) == 0 {
		return d
	}
	var sum time.Duration
	nextRel := int64(-1) // the next release after the event looked at
	for k := len(a.at) - 1; k >= 0; k-- {
		if a.arrivedN[k] > 0 {
			y := a.end - a.at[k] // censored: what was seen
			if nextRel >= 0 {
				y = nextRel - a.at[k]
			}
			sum += min(time.Duration(y), d)
		}
		if a.releasedN[k] > 0 {
			nextRel = a.at[k]
		}
	}
	return sum / time.Duration(len(a.refs))
}

// RemovableAt implements IdlePolicy.
func (a *AdaptiveIdle) RemovableAt(n *Node, rank int) time.Time {
	if len(a.refs) < a.opt.MinSamples {
		return n.IdleSince.Add(a.fallback)
	}
	now := a.end
	if t := int64(n.IdleSince.Sub(a.origin)); t > now {
		now = t
	}
	keep := a.Keep(max(rank, 0), time.Duration(now-a.lastArr))
	return a.origin.Add(time.Duration(now) + keep)
}

// Keep is how long the policy keeps an idle node of the given rank, counted
// from a time silence after the last arrival of the history.
func (a *AdaptiveIdle) Keep(rank int, silence time.Duration) time.Duration {
	key := keepKey{rank, int64(silence)}
	if k, ok := a.cache[key]; ok {
		return k
	}
	sil := int64(silence)
	xs := a.scratch[:0]
	for _, i := range a.refs {
		t := a.at[i]
		if next := a.nextArr[i]; next >= 0 && next-t <= sil {
			continue // an arrival broke a silence this long
		}
		start := t + sil
		if start >= a.end {
			continue // nothing was seen after it
		}
		// The first event after start, then the first event from there
		// at which arrivals outnumber releases by rank+1.
		s := i + 1
		if sil > 0 {
			s, _ = slices.BinarySearch(a.at, start+1)
		}
		if k := a.net.first(s+1, a.net.at(s)+rank+1); k >= 0 {
			xs = append(xs, sample{x: a.at[k-1] - start})
		} else {
			xs = append(xs, sample{x: a.end - start, censored: true})
		}
	}
	a.scratch = xs
	var keep time.Duration
	if len(xs) >= a.opt.MinSamples {
		keep = bestKeep(xs, a.value)
	}
	if a.opt.MaxIdle > 0 {
		keep = min(keep, a.opt.MaxIdle)
	}
	a.cache[key] = keep
	return keep
}

// bestKeep returns the K among 0 and the observed sample times that
// maximizes value·F(K) − ∫₀ᴷ S(t) dt, where S = 1 − F is the Kaplan–Meier
// survival of the samples (the integral is E[min(x, K)]); value is in
// seconds. It sorts xs.
func bestKeep(xs []sample, value float64) time.Duration {
	slices.SortFunc(xs, func(p, q sample) int {
		if c := cmp.Compare(p.x, q.x); c != 0 {
			return c
		}
		switch {
		case p.censored == q.censored:
			return 0
		case !p.censored:
			return -1 // events before censorings at the same time
		}
		return 1
	})
	atRisk := float64(len(xs))
	surv, area, prev := 1.0, 0.0, int64(0)
	var best float64
	var keep int64
	for _, p := range xs {
		area += surv * float64(p.x-prev) / 1e9
		prev = p.x
		if !p.censored {
			surv *= 1 - 1/atRisk
			if gain := value*(1-surv) - area; gain > best {
				best, keep = gain, p.x
			}
		}
		atRisk--
	}
	return time.Duration(keep)
}

// maxTree answers "the first index from lo whose value is at least v" in
// O(log n) over an array of ints.
type maxTree struct {
	size int   // leaves, a power of two
	n    int   // values
	t    []int // t[1] is the root; the leaves start at t[size]
}

// build makes the tree over vals, reusing the tree's memory.
func (m *maxTree) build(vals []int) {
	m.n, m.size = len(vals), 1
	for m.size < len(vals) {
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

func (m *maxTree) at(i int) int { return m.t[m.size+i] }

// first returns the smallest i >= lo with value >= v, or -1.
func (m *maxTree) first(lo, v int) int {
	if lo >= m.n {
		return -1
	}
	return m.descend(1, 0, m.size-1, lo, v)
}

func (m *maxTree) descend(node, l, r, lo, v int) int {
	if r < lo || m.t[node] < v {
		return -1
	}
	if l == r {
		return l
	}
	mid := (l + r) / 2
	if i := m.descend(2*node, l, mid, lo, v); i >= 0 {
		return i
	}
	return m.descend(2*node+1, mid+1, r, lo, v)
}

// IdleHistory gathers what AdaptiveIdle learns from as a cluster runs: its
// recent demand events and the provisioning delays it has observed. The
// zero value is ready to use.
type IdleHistory struct {
	// Window is how many demand events (distinct times) are remembered;
	// <= 0: 1024.
	Window int

	events  []DemandEvent // ring, oldest at next once full
	next    int
	delays  [16]time.Duration // ring of observed provisioning delays
	nd      int
	changed bool
	policy  AdaptiveIdle
	built   bool // policy was built with fallback and opt
	fb      time.Duration
	opt     AdaptiveOptions
	ordered []DemandEvent
}

func (h *IdleHistory) add(e DemandEvent) {
	h.changed = true
	w := h.Window
	if w <= 0 {
		w = 1024
	}
	if n := len(h.events); n > 0 {
		// The newest event: the last one until the ring is full, then the
		// one before next.
		if last := &h.events[(h.next+n-1)%n]; last.At.Equal(e.At) {
			last.Arrived += e.Arrived
			last.Released += e.Released
			return
		}
	}
	if len(h.events) < w {
		h.events = append(h.events, e)
		return
	}
	h.events[h.next] = e
	h.next = (h.next + 1) % w
}

// Arrive records a job of nodes nodes (at least 1) submitted at t.
func (h *IdleHistory) Arrive(t time.Time, nodes int) {
	h.add(DemandEvent{At: t, Arrived: max(nodes, 1)})
}

// Release records nodes nodes that became idle at t because their job
// ended (not nodes that just finished provisioning).
func (h *IdleHistory) Release(t time.Time, nodes int) {
	if nodes > 0 {
		h.add(DemandEvent{At: t, Released: nodes})
	}
}

// Provisioned records that a node took d from request to ready.
func (h *IdleHistory) Provisioned(d time.Duration) {
	h.delays[h.nd%len(h.delays)] = d
	h.nd++
	h.changed = true
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

// Policy returns the adaptive policy for the history as it is now. The
// history owns it: it is rebuilt in place when the history has changed, so
// a policy from an earlier call must not be used after this one.
func (h *IdleHistory) Policy(fallback time.Duration, opt AdaptiveOptions) *AdaptiveIdle {
	if h.changed || !h.built || h.fb != fallback || h.opt != opt {
		h.ordered = append(append(h.ordered[:0], h.events[h.next:]...), h.events[:h.next]...)
		h.policy.reset(h.ordered, h.Provisioning(), fallback, opt)
		h.changed, h.built, h.fb, h.opt = false, true, fallback, opt
	}
	return &h.policy
}
