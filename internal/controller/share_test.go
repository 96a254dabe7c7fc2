package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/metrics/metricstest"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// withQueue gives a stored compute a queue policy, as a PATCH does.
func (h *harness) withQueue(c api.Compute, p api.QueuePolicy) api.Compute {
	h.t.Helper()
	d, err := store.Get[api.Compute](h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := api.ApplyUpdate(&d.Value, &api.ClusterUpdateProperties{QueuePolicy: &p}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name, d.Value, d.Version, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return d.Value
}

// submitAs submits a one-node job as principal who, through the one
// creation path (lifecycle.Submit: its group).
func (h *harness) submitAs(c api.Compute, who string) string {
	h.t.Helper()
	h.seq++
	name := fmt.Sprintf("%s-%d", who, h.seq)
	doc := api.Job{Properties: api.JobProperties{Command: "true", ComputeID: c.ID}}
	if err := api.PrepareJob(&doc, name); err != nil {
		h.t.Fatal(err)
	}
	var j store.Job
	err := h.db.Tx(h.ctx, func(q store.Querier) (err error) {
		j, _, err = lifecycle.Submit(h.ctx, q, lifecycle.Submission{Workspace: h.sc, Name: name, Job: doc, Principal: who}, h.clk.Now())
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return j.UID
}

// startOrder runs a max-2 cluster's queue to the end, one job ending per
// pass (the one that started first), and returns the jobs in the order
// they started.
func (h *harness) startOrder(c api.Compute) []string {
	h.t.Helper()
	var order []string
	started := map[string]bool{}
	for range 40 {
		h.pass()
		h.register(c)
		h.pass()
		running := ""
		for _, n := range h.nodes(c) {
			if n.JobID == "" {
				continue
			}
			if j := h.job(n.JobID); !started[j.UID] {
				started[j.UID] = true
				order = append(order, j.UID)
			}
		}
		for _, uid := range order { // the job that started first ends first
			if st := h.job(uid).Doc.Properties.Status; running == "" && !api.JobTerminal(st) {
				running = uid
			}
		}
		if running == "" {
			return order
		}
		h.clk.Step(time.Minute)
		h.heartbeat(c)
		h.finish(running, 0)
	}
	h.t.Fatal("the queue did not drain")
	return nil
}

// names are the names of jobs by uid.
func (h *harness) names(uids []string) []string {
	out := make([]string, len(uids))
	for i, uid := range uids {
		out[i] = h.job(uid).Doc.Name
	}
	return out
}

// Alice queues 12 jobs, then bob 3, on a cluster of at most 2 nodes: under
// FIFO bob's first starts after all of alice's; under fair share bob's
// jobs start in turn with alice's.
func TestFairShareGivesEachPrincipalItsTurn(t *testing.T) {
	for _, policy := range []string{"fifo", "fair"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t)
			c := h.compute("shared", 0, 2, "PT60S")
			if policy == "fair" {
				c = h.withQueue(c, api.QueuePolicy{Kind: api.QueuePolicyFairShare})
			}
			for range 12 {
				h.submitAs(c, "alice")
			}
			for range 3 {
				h.submitAs(c, "bob")
			}
			order := h.names(h.startOrder(c))
			bobAt := slices.IndexFunc(order, func(n string) bool { return strings.HasPrefix(n, "bob") })
			t.Logf("%s: %v", policy, order)
			switch {
			case policy == "fifo" && bobAt != 12:
				t.Errorf("FIFO: bob's first job started %dth, want 13th (after alice's 12)", bobAt+1)
			case policy == "fair" && bobAt > 2:
				t.Errorf("fair share: bob's first job started %dth, want within the first 3", bobAt+1)
			}
			if policy == "fair" {
				bobs := 0
				for _, n := range order[:6] {
					if strings.HasPrefix(n, "bob") {
						bobs++
					}
				}
				if bobs != 3 {
					t.Errorf("fair share: %d of bob's 3 jobs among the first 6 started, want all", bobs)
				}
			}
		})
	}
}

// A group's usage is written when what it holds changes, not on every
// pass, and decays between.
func TestFairShareUsageIsWrittenOnChange(t *testing.T) {
	h := newHarness(t)
	c := h.withQueue(h.compute("shared", 0, 2, "PT60S"), api.QueuePolicy{Kind: api.QueuePolicyFairShare})
	a := h.submitAs(c, "alice")
	h.pass()
	h.register(c)
	h.pass()
	h.pass() // the next pass sees it hold its node
	read := func() map[string]store.ShareUsage {
		u, err := store.ShareUsages(h.ctx, h.db.Q(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	first := read()
	if u := first["alice"]; u.Held != 1 || !u.At.Equal(h.clk.Now()) {
		t.Fatalf("after alice's job started: %+v", first)
	}
	h.clk.Step(time.Hour)
	h.heartbeat(c)
	h.pass()
	if u := read(); u["alice"] != first["alice"] {
		t.Errorf("a pass without change rewrote the usage: %+v", u)
	}
	h.finish(a, 0)
	h.pass()
	u := read()["alice"]
	if u.Held != 0 || !u.At.Equal(h.clk.Now()) || u.Value < 3500 || u.Value > 3600 {
		t.Errorf("after an hour on one node: %+v, want about 3,550 node-seconds held by none", u)
	}
}

// With preemption OverShare, bob's job waits for the cluster at its
// maximum until alice's newest job has run its minimum runtime; then that
// job is stopped with the reason, an event and a metric, queued again,
// and bob's job starts on its node once alice's agent has stopped it.
func TestFairSharePreemptsForAGroupUnderItsShare(t *testing.T) {
	h := newHarness(t)
	m := metrics.New(metrics.Options{})
	h.c.Metrics = m
	c := h.withQueue(h.compute("shared", 0, 2, "PT60S"),
		api.QueuePolicy{Kind: api.QueuePolicyFairShare, Preemption: api.PreemptOverShare, MinRuntime: "PT10M"})
	a1 := h.submitAs(c, "alice")
	h.pass()
	h.register(c)
	h.pass()
	h.clk.Step(time.Minute)
	h.heartbeat(c)
	a2 := h.submitAs(c, "alice")
	h.pass()
	h.register(c)
	h.pass()
	if h.job(a1).Doc.Properties.Status != api.JobPreparing || h.job(a2).Doc.Properties.Status != api.JobPreparing {
		t.Fatal("alice's jobs did not start")
	}
	h.clk.Step(5 * time.Minute)
	b := h.submitAs(c, "bob")
	h.heartbeat(c)
	wake, err := h.c.RunOnce(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := h.job(a2).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("alice's job was stopped within its minimum runtime: %s", st)
	}
	if want := t0.Add(11 * time.Minute); !wake.Equal(want) && wake.After(want) {
		t.Errorf("the pass asks to be woken at %v, want by %v (alice's newest job reaches its minimum runtime)", wake, want)
	}
	bj := h.job(b)
	if msg := api.QueueReason(*h.storedCompute(c), &bj.Doc, b); !strings.Contains(msg, "bob is within its share: 0 of 1 nodes") {
		t.Errorf("bob's job says %q", msg)
	}
	h.clk.Set(t0.Add(11 * time.Minute))
	h.heartbeat(c)
	h.pass()
	j := h.job(a2)
	want := "preempted for fair share: alice is over its share (2 of 1 nodes) and job " + h.job(b).Doc.Name + " of bob, within its share (0 of 1 nodes), waits"
	if j.Doc.Properties.Status != api.JobQueued || j.Doc.Properties.StatusMessage != want+"; queued again" {
		t.Fatalf("alice's newest job is %s %q, want queued again with %q", j.Doc.Properties.Status, j.Doc.Properties.StatusMessage, want)
	}
	if st := h.job(a1).Doc.Properties.Status; st != api.JobPreparing {
		t.Errorf("alice's older job is %s: only one was needed", st)
	}
	_, evs := h.history(c)
	var preempted []store.Event
	for _, e := range evs {
		if e.Type == api.EventJobPreempted {
			preempted = append(preempted, e)
		}
	}
	if len(preempted) != 1 || preempted[0].Reason != api.PreemptOverShare || !strings.Contains(preempted[0].Message, want) {
		t.Errorf("events %+v", preempted)
	}
	if got := preemptionsCounted(t, m, "over_share"); got != 1 {
		t.Errorf("cumulus_job_preemptions_total{reason=over_share} = %v, want 1", got)
	}
	// Its node keeps it until the agent has stopped it; then bob's starts.
	var node string
	for _, n := range h.nodes(c) {
		if n.JobID == a2 {
			node = n.ID
		}
	}
	if node == "" {
		t.Fatal("alice's stopped job left its node before its agent stopped it")
	}
	h.pass()
	if st := h.job(b).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("bob's job is %s before alice's stopped", st)
	}
	if err := h.db.Tx(h.ctx, func(q store.Querier) error {
		return lifecycle.Exited(h.ctx, q, h.job(a2), node, 1, 143, "preempted", h.clk.Now())
	}); err != nil {
		t.Fatal(err)
	}
	h.pass()
	if j := h.job(b); j.Doc.Properties.Status != api.JobPreparing || !slices.Equal(j.Nodes, []string{node}) {
		t.Errorf("bob's job is %s on %v, want Preparing on %s", j.Doc.Properties.Status, j.Nodes, node)
	}
}

// preemptionsCounted sums cumulus_job_preemptions_total of a reason.
func preemptionsCounted(t *testing.T, m *metrics.Metrics, reason string) float64 {
	t.Helper()
	mfs, err := metricstest.Gatherer(m.Handler()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "cumulus_job_preemptions_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					sum += s.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
