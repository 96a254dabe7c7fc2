package decide

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// rankKeep keeps an idle node keep[rank] past its IdleSince (the last
// entry for higher ranks).
type rankKeep []time.Duration

func (k rankKeep) RemovableAt(n *Node, rank int) time.Time {
	return n.IdleSince.Add(k[min(rank, len(k)-1)])
}

var _ IdlePolicy = rankKeep(nil)
var _ IdlePolicy = (*AdaptiveIdle)(nil)

func TestIdlePolicy(t *testing.T) {
	// i3 is the most recently idle (rank 0), i1 the longest (rank 2).
	three := []Node{idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)), idleNode("i3", t0.Add(2*time.Minute))}
	tests := []struct {
		name string
		c    Cluster
		now  time.Time
		want Plan
	}{
		{
			name: "each rank its own time; the back goes first",
			c:    Cluster{Max: 5, IdleTimeout: time.Hour, Headroom: -1, Nodes: three, IdlePolicy: rankKeep{10 * time.Minute, 5 * time.Minute, 0}},
			now:  t0,
			// i1 (rank 2) goes at once; i2 (rank 1) at t0+6m.
			want: Plan{Remove: []string{"i1"}, Target: 2, WakeAt: t0.Add(6 * time.Minute)},
		},
		{
			name: "at the next deadline the next node goes",
			c:    Cluster{Max: 5, IdleTimeout: time.Hour, Headroom: -1, Nodes: three[1:], IdlePolicy: rankKeep{10 * time.Minute, 5 * time.Minute, 0}},
			now:  t0.Add(6 * time.Minute),
			want: Plan{Remove: []string{"i2"}, Target: 1, WakeAt: t0.Add(12 * time.Minute)},
		},
		{
			name: "a node not yet due stops scale-down, even with a due node in front",
			c:    Cluster{Max: 5, Headroom: -1, Nodes: three, IdlePolicy: rankKeep{0, 0, time.Hour}},
			now:  t0.Add(3 * time.Minute),
			want: Plan{Target: 3, WakeAt: t0.Add(time.Hour)},
		},
		{
			name: "minimum kept",
			c:    Cluster{Min: 2, Max: 5, Headroom: -1, Nodes: three, IdlePolicy: rankKeep{0}},
			now:  t0.Add(3 * time.Minute),
			want: Plan{Remove: []string{"i1"}, Target: 2},
		},
		{
			name: "nodes reserved for a waiting gang job are kept",
			// A gang job of 4 waits for a fourth node: the three idle
			// nodes are reserved for it, whatever the policy says.
			c:    Cluster{Max: 5, Headroom: -1, Nodes: three, Queued: []Job{gang("g", 4, 1)}, IdlePolicy: rankKeep{0}},
			now:  t0.Add(3 * time.Minute),
			want: Plan{Create: 1, Target: 4},
		},
		{
			name: "assignment first: the node given work is not ranked",
			// a takes i3; i2 becomes rank 0 (10 min), i1 rank 1 (0).
			c:    Cluster{Max: 5, Headroom: -1, Nodes: three, Queued: jobs("a"), IdlePolicy: rankKeep{10 * time.Minute, 0}},
			now:  t0.Add(3 * time.Minute),
			want: Plan{Assign: []Assignment{{JobID: "a", NodeIDs: []string{"i3"}}}, Remove: []string{"i1"}, Target: 2, WakeAt: t0.Add(11 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPlan(t, Decide(tt.c, tt.now), tt.want)
		})
	}
}

// history builds demand events: arrivals of one node at the given offsets
// and releases of one node at the other offsets.
func history(arrive, release []time.Duration) []DemandEvent {
	var ev []DemandEvent
	for _, d := range arrive {
		ev = append(ev, DemandEvent{At: t0.Add(d), Arrived: 1})
	}
	for _, d := range release {
		ev = append(ev, DemandEvent{At: t0.Add(d), Released: 1})
	}
	return ev
}

func every(gap time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * gap
	}
	return out
}

func TestAdaptiveIdle(t *testing.T) {
	opt := DefaultAdaptive()
	opt.DelayWeight = 1
	const d = 3 * time.Minute

	t.Run("short history: the fixed timeout", func(t *testing.T) {
		a := NewAdaptiveIdle(history(every(time.Minute, 10), nil), d, 2*time.Minute, opt)
		n := idleNode("n", t0.Add(time.Hour))
		if got := a.RemovableAt(&n, 0); !got.Equal(n.IdleSince.Add(2 * time.Minute)) {
			t.Errorf("removable at t0+%v, want IdleSince+2m", got.Sub(t0))
		}
	})

	t.Run("regular arrivals: keep the next node until work comes", func(t *testing.T) {
		// One arrival a minute, none released: the rank 0 node gets
		// work within a minute, worth keeping; the work that comes
		// takes a node that would otherwise have waited 3 minutes.
		a := NewAdaptiveIdle(history(every(time.Minute, 100), nil), d, 2*time.Minute, opt)
		if k := a.Keep(0, 0); k != time.Minute {
			t.Errorf("rank 0 kept %v, want 1m", k)
		}
		if k := a.Keep(2, 0); k != 3*time.Minute {
			t.Errorf("rank 2 kept %v, want 3m", k)
		}
		// Releases as frequent as arrivals: a node is rarely needed.
		rel := NewAdaptiveIdle(history(every(time.Minute, 100), every(time.Minute, 100)), d, 2*time.Minute, opt)
		if k := rel.Keep(0, 0); k != 0 {
			t.Errorf("rank 0 kept %v with a release for every arrival, want 0", k)
		}
	})

	t.Run("rare arrivals: do not keep", func(t *testing.T) {
		a := NewAdaptiveIdle(history(every(time.Hour, 100), nil), d, 2*time.Minute, opt)
		if k := a.Keep(0, 0); k != 0 {
			t.Errorf("kept %v for work an hour away, want 0", k)
		}
	})

	t.Run("bursts: keep after a burst, not after a lull", func(t *testing.T) {
		// Bursts of 10 arrivals 10 s apart, every 2 hours.
		var arr []time.Duration
		for b := range 30 {
			for i := range 10 {
				arr = append(arr, time.Duration(b)*2*time.Hour+time.Duration(i)*10*time.Second)
			}
		}
		a := NewAdaptiveIdle(history(arr, nil), d, 2*time.Minute, opt)
		if k := a.Keep(0, 0); k != 10*time.Second {
			t.Errorf("just after an arrival: kept %v, want 10s", k)
		}
		if k := a.Keep(0, 5*time.Minute); k != 0 {
			t.Errorf("5 minutes into a lull: kept %v, want 0", k)
		}
		// The node idle since after the last arrival: keep counts from
		// its IdleSince, with the silence it has seen.
		last := arr[len(arr)-1]
		n := idleNode("n", t0.Add(last+5*time.Minute))
		if got := a.RemovableAt(&n, 0); !got.Equal(n.IdleSince) {
			t.Errorf("removable at t0+%v, want its IdleSince", got.Sub(t0))
		}
		old := idleNode("old", t0)
		if got := a.RemovableAt(&old, 0); !got.Equal(t0.Add(last + 10*time.Second)) {
			t.Errorf("removable at t0+%v, want the last arrival + 10s", got.Sub(t0))
		}
	})

	t.Run("history builds the same policy", func(t *testing.T) {
		var h IdleHistory
		h.Window = 50
		for i := range 80 {
			h.Arrive(t0.Add(time.Duration(i)*time.Minute), 1, 0)
			h.Release(t0.Add(time.Duration(i)*time.Minute+30*time.Second), 0) // nothing released: ignored
		}
		h.Provisioned(2 * time.Minute)
		h.Provisioned(4 * time.Minute)
		if h.Provisioning() != d {
			t.Errorf("provisioning %v, want the mean, 3m", h.Provisioning())
		}
		p := h.Policy(2*time.Minute, opt)
		direct := NewAdaptiveIdle(history(every(time.Minute, 79)[29:], nil), d, 2*time.Minute, opt)
		for rank := range 4 {
			if p.Keep(rank, 0) != direct.Keep(rank, 0) {
				t.Errorf("rank %d: history %v, direct %v", rank, p.Keep(rank, 0), direct.Keep(rank, 0))
			}
		}
		if again := h.Policy(2*time.Minute, opt); again != p {
			t.Error("policy rebuilt though nothing changed")
		}
	})
}

// TestAdaptiveProperties: with the adaptive policy (or any policy that
// keeps nodes at least until IdleSince), Decide keeps its invariants, the
// plan holds until WakeAt, and no idle node goes before its time.
func TestAdaptiveProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range propertyCases / 4 {
		c, now := randomCluster(r)
		var ev []DemandEvent
		for range r.IntN(80) {
			ev = append(ev, DemandEvent{At: t0.Add(time.Duration(r.IntN(45*60)) * time.Second), Arrived: r.IntN(3), Released: r.IntN(2)})
		}
		opt := DefaultAdaptive()
		opt.MinSamples = 1 + r.IntN(8)
		opt.DelayWeight = r.Float64() * 4
		var policy IdlePolicy = NewAdaptiveIdle(ev, time.Duration(r.IntN(300))*time.Second, c.IdleTimeout, opt)
		if r.IntN(3) == 0 {
			policy = rankKeep{time.Duration(r.IntN(20)) * time.Minute, time.Duration(r.IntN(20)) * time.Minute, 0}
		}
		c.IdlePolicy = policy
		p := Decide(c, now)
		// IdleTimeout is unused with a policy: 0 makes checkInvariants
		// check only that no node goes before its IdleSince.
		plain := c
		plain.IdleTimeout = 0
		if err := checkInvariants(plain, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
		if err := checkStable(c, now, p, r); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
		if err := checkRemovedDue(c, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
	}
}

// checkRemovedDue: an idle node removed while the cluster is within
// maxNodeCount was due by the policy at its rank.
func checkRemovedDue(c Cluster, now time.Time, p Plan) error {
	_, hi := limits(c)
	after := ApplyAssignments(c, p.Assign)
	v := newView(after)
	if v.live() > hi {
		return nil // over max: idle nodes go whatever their time
	}
	if c.GPUs != nil && c.GPUs.Wanted > 0 {
		return nil // released for other clusters' GPUs (checkGPUs bounds how many)
	}
	demand, _ := demandOf(after.Queued, hi)
	protected := min(len(v.idle), demand)
	for k, i := range v.idle {
		n := &v.nodes[i]
		removed := false
		for _, id := range p.Remove {
			removed = removed || id == n.ID
		}
		if removed && now.Before(c.IdlePolicy.RemovableAt(n, k-protected)) {
			return fmt.Errorf("node %s (rank %d) removed before it was due", n.ID, k-protected)
		}
	}
	return nil
}
