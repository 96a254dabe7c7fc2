package controller

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// spotCompute stores a low-priority compute with the given grace.
func (h *harness) spotCompute(name string, min, max int32, grace string) api.Compute {
	h.t.Helper()
	c := h.compute(name, min, max, "PT120S")
	c.Aml().VMPriority, c.Aml().PreemptionGracePeriod = api.PriorityLowPriority, grace
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), name, c, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) evict(node string) {
	h.t.Helper()
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		_, err := lifecycle.Evict(h.ctx, q, node, h.clk.Now())
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// A preempted node whose agent never reports its job stopped (it died with
// the machine) still gives its job back: after the grace period and a
// margin the job is queued again, without using a failure retry.
func TestEvictedNodeThatNeverReportsRequeuesItsJob(t *testing.T) {
	h := newHarness(t)
	h.c.MaxAttempts = 1 // a node failure would fail the job at once
	c := h.spotCompute("spot", 0, 1, "PT30S")
	j := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	victim := h.nodes(c)[0].ID
	h.evict(victim)
	h.clk.Step(30*time.Second + evictionReportMargin - time.Second)
	h.heartbeat(c)
	h.pass()
	if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("job %s inside the grace period and margin, want it still on its node", st)
	}
	h.clk.Step(2 * time.Second)
	h.heartbeat(c)
	h.pass()
	got := h.job(j)
	if got.Doc.Properties.Status != api.JobQueued || got.Preemptions != 1 {
		t.Fatalf("job %s with %d preemptions, want Queued after 1", got.Doc.Properties.Status, got.Preemptions)
	}
	h.pass() // the preempted node is removed and a new one asked for
	ns := h.nodes(c)
	if len(ns) != 1 || ns[0].ID == victim || ns[0].State != api.NodePreparing {
		t.Fatalf("nodes = %+v, want one new preparing node", ns)
	}
}

// Random evictions follow the rate: with a die that always says "evict",
// every low-priority node is preempted at its second roll; dedicated
// nodes never are.
func TestRandomEvictionOnlyTouchesLowPriorityNodes(t *testing.T) {
	h := newHarness(t)
	h.c.EvictionRate = 1
	h.c.Rand = func() float64 { return 0 }
	spot := h.spotCompute("spot", 1, 1, "PT30S")
	dedicated := h.compute("dedicated", 1, 1, "PT120S")
	h.pass()
	h.register(spot)
	h.register(dedicated)
	h.pass() // first roll: only remembers when
	h.clk.Step(time.Second)
	h.heartbeat(spot)
	h.heartbeat(dedicated)
	h.pass()
	if len(h.prov.DeleteCalls) != 1 {
		t.Fatalf("provider deleted %v: want the spot node preempted and removed", h.prov.DeleteCalls)
	}
	if n := h.nodes(spot); len(n) != 1 || n[0].State != api.NodePreparing {
		t.Fatalf("spot nodes = %+v, want a replacement for min 1", n)
	}
	if n := h.nodes(dedicated); len(n) != 1 || n[0].State != api.NodeIdle {
		t.Fatalf("dedicated nodes = %+v, want it untouched", n)
	}
}

// The chance of an eviction over t at rate λ per node-hour is 1−e^(−λt).
func TestEvictionChanceFollowsTheRate(t *testing.T) {
	h := newHarness(t)
	h.c.EvictionRate = 3600 // one per node-second on average
	h.c.Rand = func() float64 { return 0.6 }
	now := t0
	h.c.evictNow("n", now)
	if h.c.evictNow("n", now.Add(500*time.Millisecond)) { // 1−e^(−0.5) ≈ 0.39 < 0.6
		t.Fatal("evicted although the chance over 0.5 s is 39% and the die said 60%")
	}
	if !h.c.evictNow("n", now.Add(1500*time.Millisecond)) { // over the next 1 s: 63% > 60%
		t.Fatal("not evicted although the chance over 1 s is 63% and the die said 60%")
	}
}

// A job preempted again and again stops after the preemption limit, not
// after the failure retry limit.
func TestPreemptionLimit(t *testing.T) {
	h := newHarness(t)
	h.c.MaxAttempts = 1
	h.c.MaxPreemptions = 3
	c := h.spotCompute("spot", 0, 1, "PT0S")
	j := h.submit(c, 1)
	for i := 1; i <= 3; i++ {
		h.pass()
		h.pass()
		h.register(c)
		h.pass()
		node := h.job(j).Nodes[0]
		h.evict(node)
		err := h.db.Tx(h.ctx, func(q store.Querier) error {
			return lifecycle.Preempted(h.ctx, q, node, h.c.MaxPreemptions, h.clk.Now())
		})
		if err != nil {
			t.Fatal(err)
		}
		want := api.JobQueued
		if i == 3 {
			want = api.JobFailed
		}
		if st := h.job(j).Doc.Properties.Status; st != want {
			t.Fatalf("after preemption %d the job is %s, want %s", i, st, want)
		}
	}
}
