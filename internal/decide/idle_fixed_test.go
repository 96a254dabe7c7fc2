package decide

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestFixedPool(t *testing.T) {
	// Timeout 120 s, provisioning 100 s; times in seconds.
	const timeout, prov = int64(120 * time.Second), int64(100 * time.Second)
	s := func(x int) int64 { return int64(x) * int64(time.Second) }
	steps := []struct {
		arrive  bool
		at      int
		nodes   int
		missed  int // after the step
		waiting int
	}{
		{true, 0, 1, 1, 1},     // nothing idle: a node is requested, ready at 100
		{false, 50, 1, 1, 0},   // a job ends: its node takes the waiting work
		{true, 150, 1, 1, 0},   // the node requested at 0 went idle at 100: taken
		{true, 400, 1, 2, 1},   // nothing idle: ready at 500
		{true, 420, 1, 3, 2},   // still nothing: ready at 520
		{false, 600, 1, 3, 0},  // both nodes took their work; the released one goes idle
		{true, 700, 2, 4, 1},   // a gang of 2 finds one idle node: it waits (ready at 800)
		{true, 1000, 1, 5, 1},  // the node of 800 took the gang's waiting part: nothing idle
		{false, 1100, 1, 5, 0}, // the node of 1100 took the waiting work; the released one idles
		{true, 1300, 1, 6, 1},  // idle since 1100, 200 s: removed by the timeout
	}
	var p fixedPool
	for i, st := range steps {
		if st.arrive {
			p.arrive(s(st.at), st.nodes, timeout, prov)
		} else {
			p.release(s(st.at), st.nodes, timeout)
		}
		if p.missed != st.missed || p.waiting != st.waiting {
			t.Fatalf("step %d (t=%d): missed %d waiting %d, want %d and %d", i, st.at, p.missed, p.waiting, st.missed, st.waiting)
		}
	}
}

func TestAdaptiveHoldsItselfToTheFixedTimeout(t *testing.T) {
	// One-node jobs of 5 to 60 minutes; each next job comes 10 to 110 s
	// after the previous one ended (the model reads the time since the
	// last arrival, which tells little here). Under a fixed 120 s timeout
	// every job after the first finds the node idle.
	build := func(idle int) *IdleHistory {
		r := rand.New(rand.NewPCG(1, 2))
		var h IdleHistory
		h.Policy(2*time.Minute, DefaultAdaptive())
		at := t0
		for i := range 60 {
			h.Arrive(at, 1, min(i, idle))
			end := at.Add(time.Duration(5+r.IntN(56)) * time.Minute)
			h.Release(end, 1)
			at = end.Add(time.Duration(10+r.IntN(101)) * time.Second)
		}
		h.Provisioned(3 * time.Minute)
		return &h
	}
	kept := build(1)   // every job after the first found the node
	missed := build(0) // no job found it: 59 more misses than fixed
	if m, f := kept.Missed(); m != 1 || f != 1 {
		t.Fatalf("found idle: missed %d, fixed %d; want 1 and 1", m, f)
	}
	if m, f := missed.Missed(); m != 60 || f != 1 {
		t.Fatalf("found nothing: missed %d, fixed %d; want 60 and 1", m, f)
	}
	n := idleNode("n", kept.origin.Add(time.Duration(kept.at[len(kept.at)-1])))
	a := kept.Policy(2*time.Minute, DefaultAdaptive()).RemovableAt(&n, 0)
	b := missed.Policy(2*time.Minute, DefaultAdaptive()).RemovableAt(&n, 0)
	if !a.Equal(n.IdleSince) {
		t.Errorf("not behind the fixed timeout: the node goes at +%v, want at once (the model alone sees no gain)", a.Sub(n.IdleSince))
	}
	if !b.After(a) {
		t.Errorf("a cluster that missed more than the fixed timeout keeps its node until +%v, no longer than one that did not (+%v)", b.Sub(n.IdleSince), a.Sub(n.IdleSince))
	}
}

// BenchmarkIdleHistoryBurst: 100,000 one-node jobs submitted at one instant
// to an empty cluster, then released one by one (what a controller pass
// records after a large batch submit).
func BenchmarkIdleHistoryBurst(b *testing.B) {
	for b.Loop() {
		var h IdleHistory
		h.Policy(2*time.Minute, DefaultAdaptive())
		for range 100_000 {
			h.Arrive(t0, 1, 0)
		}
		for i := range 100_000 {
			h.Release(t0.Add(time.Hour+time.Duration(i)*time.Millisecond), 1)
		}
	}
}
