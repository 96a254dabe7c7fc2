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
	// policy trusts it; with fewer, the fixed timeout applies. At least 1.
	MinSamples int
	// Provisioning is the provisioning delay assumed until one has been
	// observed.
	Provisioning time.Duration
	// MaxIdle caps how long a node is kept; 0: no cap.
	MaxIdle time.Duration
	// Window is how many demand events (distinct times) IdleHistory
	// remembers; <= 0: 1024.
	Window int
	// Implied: value from the fixed timeout.
	Implied bool
	Mix     bool
	FIFO    bool
	Old     bool
}

// DefaultAdaptive returns the default options: a second of waiting is worth
// a second of node time, 16 arrival instants, 3 minutes of provisioning
// until observed, no cap.
func DefaultAdaptive() AdaptiveOptions {
	return AdaptiveOptions{DelayWeight: 1, MinSamples: 16, Provisioning: 3 * time.Minute}
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
//     history, u after that event. The reference points for "now" are the
//     past events like the last one (arrivals if it had arrivals, else
//     releases that came after a similar silence without arrivals) that no
//     event followed within u; from u after each, the time until arrivals
//     outnumber releases by r+1 is one sample, right-censored at the end of
//     the history; the distribution is the Kaplan–Meier estimate. So a long
//     silence counts as it should, and so does the work that people submit
//     when their last job ends;
//   - the node may go at "now" + K, a time that moves only when the history
//     does (each new event is a new decision).
//
// With bursty arrivals the chance of more work fades as a silence grows, so
// nodes are kept through bursts and released in lulls; the nodes at the
// back of a large idle pool, which only a burst would use, go first; and
// when jobs end about as fast as new ones come, idle nodes are rarely
// needed and go soon. With fewer than MinSamples arrival instants in the
// history, the fixed timeout applies; a rank with fewer than MinSamples
// reference points is not kept.
//
// AdaptiveIdle caches answers, so it is not safe for concurrent use.
type AdaptiveIdle struct {
	origin    time.Time // times below are nanoseconds since origin
	at        []int64   // event times, ascending and distinct
	arrived   []bool    // per event: did work arrive
	released  []bool    // per event: were nodes released
	arrivedN  []int     // per event: nodes asked for
	releasedN []int     // per event: nodes released
	silence   []int64   // per event: time since the last arrival before it (0 if it had arrivals)
	net       maxTree   // net[k]: node arrivals minus releases of events [0, k)
	arrivals  int       // events with arrivals
	end       int64     // the last event
	value     float64   // D + w·W, in seconds
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
	rank  int
	since int64
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
	a.at, a.arrived, a.released, a.silence = a.at[:0], a.arrived[:0], a.released[:0], a.silence[:0]
	a.arrivedN, a.releasedN = a.arrivedN[:0], a.releasedN[:0]
	a.arrivals = 0
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
			a.arrived = append(a.arrived, false)
			a.released = append(a.released, false)
			a.arrivedN = append(a.arrivedN, 0)
			a.releasedN = append(a.releasedN, 0)
			net = append(net, net[len(net)-1])
			k++
		}
		net[k+1] += arrived - released
		a.arrivedN[k] += arrived
		a.releasedN[k] += released
		if arrived > 0 && !a.arrived[k] {
			a.arrived[k] = true
			a.arrivals++
		}
		a.released[k] = a.released[k] || released > 0
	}
	a.sums = net
	a.net.build(net)
	a.value = provisioning.Seconds()
	if len(a.at) == 0 {
		return
	}
	a.end = a.at[len(a.at)-1]
	last := int64(-1) // the last arrival so far
	for k, t := range a.at {
		if a.arrived[k] {
			last = t
		}
		sil := t - a.at[0] // no arrival seen yet: at least since the window began
		if last >= 0 {
			sil = t - last
		}
		a.silence = append(a.silence, sil)
	}
	a.value += opt.DelayWeight * a.waitSaved(provisioning).Seconds()
	if opt.Implied {
		a.value = max(provisioning.Seconds(), a.impliedValue(a.fallback, provisioning))
	}
}

// impliedValue is the value of a reuse, in node-seconds, at which a fixed
// timeout t trades as the cluster's own setting does: the history is
// replayed with idle nodes kept t/2 and 3t/2 (released nodes join the idle
// pool, arrivals take the most recently idle), and the extra idle time of
// the longer timeout is divided by the extra reuses it bought.
func (a *AdaptiveIdle) impliedValue(t, d time.Duration) float64 {
	if t <= 0 {
		return d.Seconds()
	}
	i1, h1 := a.replayFixed(int64(t / 2))
	i2, h2 := a.replayFixed(int64(t * 3 / 2))
	if h2 <= h1 {
		return 20 * d.Seconds()
	}
	return min((i2-i1)/float64(h2-h1)/1e9, 20*d.Seconds())
}

// replayFixed replays the history with released nodes kept idle for t and
// returns the idle node-nanoseconds and the number of node arrivals served
// by an idle node.
func (a *AdaptiveIdle) replayFixed(t int64) (idle float64, hits int) {
	type block struct {
		since int64 // idle since
		n     int
	}
	var pool []block // oldest first
	for k, now := range a.at {
		// Expire the oldest.
		for len(pool) > 0 && pool[0].since+t <= now {
			idle += float64(pool[0].n) * float64(t)
			pool = pool[1:]
		}
		if n := a.arrivedN[k]; n > 0 {
			for n > 0 && len(pool) > 0 {
				top := &pool[len(pool)-1]
				take := min(n, top.n)
				idle += float64(take) * float64(now-top.since)
				hits += take
				n -= take
				if top.n -= take; top.n == 0 {
					pool = pool[:len(pool)-1]
				}
			}
		}
		if n := a.releasedN[k]; n > 0 {
			pool = append(pool, block{now, n})
		}
	}
	for _, b := range pool {
		idle += float64(b.n) * float64(min(t, a.end-b.since))
	}
	return idle, hits
}

// survival evaluates the Kaplan–Meier survival of xs at three times
// (ascending). It sorts xs.
func survival(xs []sample, at []int64) (float64, float64, float64) {
	sortSamples(xs)
	out := make([]float64, len(at))
	atRisk := float64(len(xs))
	surv, j := 1.0, 0
	for _, p := range xs {
		for j < len(at) && at[j] < p.x {
			out[j] = surv
			j++
		}
		if !p.censored {
			surv *= 1 - 1/atRisk
		}
		atRisk--
	}
	for ; j < len(at); j++ {
		out[j] = surv
	}
	return out[0], out[1], out[2]
}

func sortSamples(xs []sample) {
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
}

// waitSaved is how long work that finds no idle node waits on average, in
// the history replayed without idle nodes: each node asked for waits, in
// submission order, for a node that a running job releases, or for the
// node created for it, ready after the provisioning delay d, whichever
// comes first.
func (a *AdaptiveIdle) waitSaved(d time.Duration) time.Duration {
	if a.arrivals == 0 {
		return d
	}
	if !a.opt.FIFO {
		var sum time.Duration
		nextRel := int64(-1)
		for k := len(a.at) - 1; k >= 0; k-- {
			if a.arrived[k] {
				y := a.end - a.at[k]
				if nextRel >= 0 {
					y = nextRel - a.at[k]
				}
				sum += min(time.Duration(y), d)
			}
			if a.released[k] {
				nextRel = a.at[k]
			}
		}
		return sum / time.Duration(a.arrivals)
	}
	type unit struct {
		t int64 // when the node was asked for
		n int   // how many
	}
	q := make([]unit, 0, 64)
	var sum float64 // node-seconds waited
	var nodes float64
	dd := int64(d)
	for k, t := range a.at {
		// Nodes asked for more than d ago got their own new node.
		for len(q) > 0 && q[0].t+dd <= t {
			sum += float64(q[0].n) * float64(dd)
			q = q[1:]
		}
		if a.released[k] {
			free := a.releasedN[k]
			for free > 0 && len(q) > 0 {
				take := min(free, q[0].n)
				sum += float64(take) * float64(t-q[0].t)
				free -= take
				if q[0].n -= take; q[0].n == 0 {
					q = q[1:]
				}
			}
		}
		if n := a.arrivedN[k]; n > 0 {
			q = append(q, unit{t, n})
			nodes += float64(n)
		}
	}
	for _, u := range q {
		sum += float64(u.n) * float64(min(a.end-u.t, dd)) // censored: what was seen
	}
	return time.Duration(sum / nodes)
}

// RemovableAt implements IdlePolicy.
func (a *AdaptiveIdle) RemovableAt(n *Node, rank int) time.Time {
	if a.arrivals < a.opt.MinSamples {
		return n.IdleSince.Add(a.fallback)
	}
	now := a.end
	if t := int64(n.IdleSince.Sub(a.origin)); t > now {
		now = t
	}
	keep := a.Keep(max(rank, 0), time.Duration(now-a.end))
	return a.origin.Add(time.Duration(now) + keep)
}

// Keep is how long the policy keeps an idle node of the given rank, counted
// from since after the last event of the history.
func (a *AdaptiveIdle) Keep(rank int, since time.Duration) time.Duration {
	if len(a.at) == 0 {
		return 0
	}
	key := keepKey{rank, int64(since)}
	if k, ok := a.cache[key]; ok {
		return k
	}
	// Reference points: events like the last one. After arrivals, every
	// arrival; after releases only, releases that came after a silence
	// like the last one's, in a band widened until there are enough.
	last := len(a.at) - 1
	lo, hi := int64(0), int64(0)
	if !a.arrived[last] {
		s := a.silence[last]
		lo, hi = s/2, 2*s+int64(30*time.Second)
	}
	var xs []sample
	for {
		xs = a.samples(rank, int64(since), lo, hi)
		if len(xs) >= a.opt.MinSamples || a.arrived[last] || a.opt.Old || (lo == 0 && hi == math.MaxInt64) {
			break
		}
		lo, hi = lo/4, hi*4
		if hi > int64(30*24*time.Hour) {
			lo, hi = 0, math.MaxInt64
		}
	}
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

// samples collects, from the reference points like the last event whose
// silence lies in [lo, hi], the time from since after each until arrivals
// outnumber releases by rank+1.
func (a *AdaptiveIdle) samples(rank int, since, lo, hi int64) []sample {
	last := len(a.at) - 1
	afterArrival := a.arrived[last]
	xs := a.scratch[:0]
	for i := 0; i < last && !a.opt.Old; i++ {
		if afterArrival != a.arrived[i] || a.silence[i] < lo || a.silence[i] > hi {
			continue
		}
		start := a.at[i] + since
		if a.at[i+1] <= start {
			continue // an event came within since: not like now
		}
		// From event i+1 on, the first event at which arrivals
		// outnumber releases by rank+1.
		if k := a.net.first(i+2, a.net.at(i+1)+rank+1); k >= 0 {
			xs = append(xs, sample{x: a.at[k-1] - start})
		} else {
			xs = append(xs, sample{x: a.end - start, censored: true})
		}
	}
	if (a.opt.Mix && !afterArrival) || a.opt.Old {
		sil := a.silence[last] + since
		for i := 0; i < last; i++ {
			if !a.arrived[i] {
				continue
			}
			next := int64(-1)
			for j := i + 1; j <= last; j++ {
				if a.arrived[j] {
					next = a.at[j]
					break
				}
			}
			t := a.at[i]
			if next >= 0 && next-t <= sil {
				continue
			}
			start := t + sil
			if start >= a.end {
				continue
			}
			s, _ := slices.BinarySearch(a.at, start+1)
			if k := a.net.first(s+1, a.net.at(s)+rank+1); k >= 0 {
				xs = append(xs, sample{x: a.at[k-1] - start})
			} else {
				xs = append(xs, sample{x: a.end - start, censored: true})
			}
		}
	}
	a.scratch = xs
	return xs
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
