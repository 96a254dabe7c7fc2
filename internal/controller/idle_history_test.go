package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The adaptive idle policy in the cluster controller, on one-node clusters
// (max 1) with a 10-minute nodeIdleTimeBeforeScaleDown: what a user sees is
// when an idle node goes.

const (
	provisionDelay = 2 * time.Minute // request to ready, for every node
	jobRun         = time.Minute
	idleTimeout    = "PT10M"
)

// isolated is a history of one-node jobs two hours apart: an idle node is
// never reused, so keeping one only costs.
func isolated(jobs int) []time.Duration {
	gaps := slices.Repeat([]time.Duration{2 * time.Hour}, jobs)
	gaps[0] = 0
	return gaps
}

// bursts is a history of bursts of eight one-node jobs, each submitted 3
// minutes after the previous one ended, with 3 hours between bursts; the
// last burst has only its first `last` jobs.
func bursts(n, last int) []time.Duration {
	var gaps []time.Duration
	for b := range n {
		for j := range 8 {
			if b == n-1 && j == last {
				break
			}
			gap := 3 * time.Minute
			if j == 0 {
				gap = 3 * time.Hour
			}
			gaps = append(gaps, gap)
		}
	}
	gaps[0] = 0
	return gaps
}

// withIdlePolicy sets a compute's idle policy as a PATCH does.
func (h *harness) withIdlePolicy(c api.Compute, kind string) api.Compute {
	h.t.Helper()
	comp := h.storedCompute(c)
	if err := api.ApplyUpdate(comp, &api.ClusterUpdateProperties{IdlePolicy: &api.IdlePolicy{Kind: kind}}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name, *comp, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return *comp
}

// idleFor lets the cluster idle d (its agents polling), then makes a pass.
func (h *harness) idleFor(c api.Compute, d time.Duration) {
	h.clk.Step(d)
	h.heartbeat(c)
	h.pass()
}

// play runs one-node jobs on c one after another: before job i the
// cluster idles gaps[i]; a job starts on the idle node if there is one,
// else on a new node once it is ready, and runs jobRun. It returns when
// the last job has ended, before a pass has seen that.
func (h *harness) play(c api.Compute, gaps []time.Duration) {
	h.t.Helper()
	for i, gap := range gaps {
		if i > 0 {
			h.pass() // sees the previous job end
		}
		h.idleFor(c, gap)
		uid := h.submit(c, 1)
		h.pass()
		if h.job(uid).Doc.Properties.Status == api.JobQueued {
			h.clk.Step(provisionDelay)
			h.register(c)
			h.pass()
		}
		if st := h.job(uid).Doc.Properties.Status; st != api.JobPreparing {
			h.t.Fatalf("job %d is %s; want it started", i, st)
		}
		h.clk.Step(jobRun)
		h.heartbeat(c)
		h.finish(uid, 0)
	}
}

// An adaptive compute whose jobs never reuse an idle node lets the node go
// as soon as its job ends; with the fixed policy the same node idles the
// full ten minutes.
func TestAdaptiveIdleReleasesNodeNobodyReuses(t *testing.T) {
	for _, kind := range []string{api.IdlePolicyFixed, api.IdlePolicyAdaptive} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			c := h.withIdlePolicy(h.compute("cpu", 0, 1, idleTimeout), kind)
			h.play(c, isolated(20))
			h.pass()
			h.idleFor(c, time.Minute)
			got := len(h.nodes(c))
			if kind == api.IdlePolicyAdaptive {
				if got != 0 {
					t.Fatalf("%d nodes a minute after the job ended; want the idle node gone (no job ever reused one)", got)
				}
				return
			}
			if got != 1 {
				t.Fatalf("%d nodes a minute after the job ended; want the idle node kept (fixed 10 minutes)", got)
			}
			h.idleFor(c, 9*time.Minute)
			if got := len(h.nodes(c)); got != 0 {
				t.Fatalf("%d nodes after 10 minutes idle; want 0", got)
			}
		})
	}
}

// Below 16 jobs in its history the adaptive policy keeps the fixed timeout.
func TestAdaptiveIdleFallsBackWhileLearning(t *testing.T) {
	h := newHarness(t)
	c := h.withIdlePolicy(h.compute("cpu", 0, 1, idleTimeout), api.IdlePolicyAdaptive)
	h.play(c, isolated(10))
	h.pass()
	h.idleFor(c, 9*time.Minute)
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("%d nodes after 9 minutes idle with 10 jobs of history; want the node kept to the fixed timeout", got)
	}
	h.idleFor(c, time.Minute)
	if got := len(h.nodes(c)); got != 0 {
		t.Fatalf("%d nodes at the fixed timeout; want 0", got)
	}
}

// In a burst the next job comes soon after one ends: the adaptive policy
// keeps the idle node for it, and the job starts at once on it.
func TestAdaptiveIdleKeepsNodeThroughBursts(t *testing.T) {
	h := newHarness(t)
	c := h.withIdlePolicy(h.compute("cpu", 0, 1, idleTimeout), api.IdlePolicyAdaptive)
	h.play(c, bursts(4, 2))
	h.pass()
	h.idleFor(c, 2*time.Minute)
	ns := h.nodes(c)
	if len(ns) != 1 || ns[0].State != api.NodeIdle {
		t.Fatalf("nodes %+v two minutes after a job of a burst ended; want the idle node kept", ns)
	}
	created := len(h.prov.Created)
	h.clk.Step(time.Minute)
	h.heartbeat(c)
	uid := h.submit(c, 1)
	h.pass()
	if st := h.job(uid).Doc.Properties.Status; st != api.JobPreparing || len(h.prov.Created) != created {
		t.Fatalf("next job of the burst is %s with %d nodes created; want it started on the kept node", st, len(h.prov.Created)-created)
	}
}

// A server restart rebuilds the history from the store: the rebuilt policy
// decides as the one that watched the jobs did, so a restarted server
// still lets an unused node go at once, and still keeps one in a burst.
func TestAdaptiveIdleSurvivesRestart(t *testing.T) {
	cases := []struct {
		name string
		gaps []time.Duration
		kept bool // the idle node is still there a minute after its job ended
	}{
		{"isolated jobs", isolated(20), false},
		{"bursts", bursts(4, 2), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			c := h.withIdlePolicy(h.compute("cpu", 0, 1, idleTimeout), api.IdlePolicyAdaptive)
			h.play(c, tc.gaps)
			comp := *h.storedCompute(c)
			nodes := h.nodes(c)
			before := h.c.idlePolicy(h.ctx, comp, nodes)
			h.c = h.newClusters()
			after := h.c.idlePolicy(h.ctx, comp, nodes)
			if before == nil || after == nil {
				t.Fatalf("policies %v and %v; want both adaptive", before, after)
			}
			idle := nodes[0]
			if idle.State != api.NodeIdle {
				t.Fatalf("node %+v; want it idle", idle)
			}
			for rank := range 3 {
				for _, later := range []time.Duration{0, 30 * time.Second, 5 * time.Minute} {
					n := &decide.Node{ID: idle.ID, State: api.NodeIdle, IdleSince: idle.IdleSince.Add(later)}
					if b, a := before.RemovableAt(n, rank), after.RemovableAt(n, rank); !a.Equal(b) {
						t.Errorf("rank %d, idle since +%v: removable at %v before the restart, %v after", rank, later, b.Sub(t0), a.Sub(t0))
					}
				}
			}
			if at := after.RemovableAt(&decide.Node{ID: idle.ID, State: api.NodeIdle, IdleSince: idle.IdleSince}, 0); !at.Before(idle.IdleSince.Add(10 * time.Minute)) {
				t.Errorf("removable %v after idle; want the adaptive policy, not the fixed 10 minutes", at.Sub(idle.IdleSince))
			}

			h.pass()
			h.idleFor(c, time.Minute)
			if got := len(h.nodes(c)) == 1; got != tc.kept {
				t.Fatalf("idle node kept a minute after its job ended: %v; want %v", got, tc.kept)
			}
		})
	}
}

// The controller forgets a compute's history when it turns Fixed or is
// deleted, and learns afresh from the store when it turns adaptive again.
func TestIdleHistoryDroppedWithPolicy(t *testing.T) {
	h := newHarness(t)
	c := h.withIdlePolicy(h.compute("cpu", 0, 1, idleTimeout), api.IdlePolicyAdaptive)
	h.play(c, isolated(3))
	h.pass()
	if len(h.c.idle) != 1 {
		t.Fatalf("%d histories; want the adaptive compute's", len(h.c.idle))
	}
	c = h.withIdlePolicy(c, api.IdlePolicyFixed)
	h.pass()
	if len(h.c.idle) != 0 {
		t.Fatalf("%d histories after the compute turned Fixed; want none", len(h.c.idle))
	}
	c = h.withIdlePolicy(c, api.IdlePolicyAdaptive)
	h.pass()
	tr := h.c.idle[store.Key(c.ID)]
	if tr == nil || tr.lastSeq != 3 {
		t.Fatalf("history %+v; want one rebuilt up to the third job", tr)
	}
	if err := store.Delete(h.ctx, h.db.W(), store.KindCompute, h.sc.WorkspaceID(), c.Name, 0); err != nil {
		t.Fatal(err)
	}
	h.pass()
	if len(h.c.idle) != 0 {
		t.Fatalf("%d histories after the compute was deleted; want none", len(h.c.idle))
	}
}

// api cannot import decide; its default delay weight must be decide's.
func TestDefaultDelayWeightIsDecides(t *testing.T) {
	if got, want := float64(api.DefaultDelayWeight), decide.DefaultAdaptive().DelayWeight; got != want {
		t.Errorf("api.DefaultDelayWeight = %v, decide.DefaultAdaptive().DelayWeight = %v", got, want)
	}
}
