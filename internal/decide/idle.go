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
//   - every past arrival instant is a reference point for "now", and the
//     time from it until arrivals outnumber releases by r+1 is one sample,
//     right-censored at the end of the history; the distribution is the
//     Kaplan–Meier estimate;
//   - "now" is the later of the node's IdleSince and the last event of the
//     history, s after the last arrival: reference points followed by an
//     arrival within s are dropped and each sample starts s after its
//     reference point, so that a long silence counts as it should;
//   - the node may go at that "now" + K, a time that moves only when the
//     history does (each new event is a new decision).
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
	origin   time.Time // times below are nanoseconds since origin
	at       []int64   // event times, ascending and distinct
	net      maxTree   // net[k]: node arrivals minus releases of events [0, k)
	refs     []int     // events with arrivals
	nextArr  []int64   // per event: the time of the next arrival after it; -1 if none
	lastArr  int64
	end      int64   // the last event
	value    float64 // D + w·W, in seconds
	fallback time.Duration
	opt      AdaptiveOptions
	cache    map[keepKey]time.Duration
	scratch  []sample
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
	a.at, a.refs, a.nextArr = a.at[:0], a.refs[:0], a.nextArr[:0]
	byTime := func(x, y DemandEvent) int { return x.At.Compare(y.At) }
	if !slices.IsSortedFunc(events, byTime) {
		events = slices.Clone(events)
		slices.SortStableFunc(events, byTime)
	}
	// Merge events of one instant; net sums arrivals minus releases.
	net := a.net.t[:0] // borrowed as scratch, rebuilt below
	net = append(net, 0)
	for _, e := range events {
		arrived, released := max(e.Arrived, 0), max(e.Released, 0)
		if arrived == 0 && released == 0 {
			continue
		}
		if len(a.at) == 0 {
			a.origin = e.At
		}
		t := int64(e.At.Sub(a.origin))
		if k := len(a.at) - 1; k >= 0 && a.at[k] == t {
			net[k+1] += arrived - released
			if arrived > 0 && (len(a.refs) == 0 || a.refs[len(a.refs)-1] != k) {
				a.refs = append(a.refs, k)
			}
			continue
		}
		a.at = append(a.at, t)
		net = append(net, net[len(net)-1]+arrived-released)
		if arrived > 0 {
			a.refs = append(a.refs, len(a.at)-1)
		}
	}
	a.value = provisioning.Seconds()
	if len(a.at) == 0 {
		a.net = maxTree{}
		return
	}
	vals := slices.Clone(net) // net aliases the tree's old memory
	a.net.build(vals)
	a.end = a.at[len(a.at)-1]
	a.nextArr = slices.Grow(a.nextArr, len(a.at))[:len(a.at)]
	next, r := int64(-1), len(a.refs)-1
	for k := len(a.at) - 1; k >= 0; k-- {
		a.nextArr[k] = next
		if r >= 0 && a.refs[r] == k {
			next = a.at[k]
			r--
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
	r := len(a.refs) - 1
	for k := len(a.at) - 1; k >= 0 && r >= 0; k-- {
		if a.refs[r] == k {
			y := a.end - a.at[k] // censored: what was seen
			if nextRel >= 0 {
				y = nextRel - a.at[k]
			}
			sum += min(time.Duration(y), d)
			r--
		}
		if a.net.at(k+1) < a.net.at(k)+a.arrivedAt(k) {
			nextRel = a.at[k] // event k released nodes
		}
	}
	return sum / time.Duration(len(a.refs))
}

// arrivedAt is how many nodes arrived at event k: the net change when k
// released nothing. Only its sign against the net change matters to
// waitSaved, which asks whether event k released nodes; refs say whether
// it had arrivals at all.
func (a *AdaptiveIdle) arrivedAt(k int) int {
	if i, ok := slices.BinarySearch(a.refs, k); ok && a.refs[i] == k {
		return a.net.at(k+1) - a.net.at(k) + a.released(k)
	}
	return 0
}

func (a *AdaptiveIdle) released(int) int { return 0 }
