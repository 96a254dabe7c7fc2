package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/sweep"
)

const sweepWS = "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/w"

type sweepHarness struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
	clk *clock.Fake
	c   *Sweeps
}

func newSweepHarness(t *testing.T) *sweepHarness {
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &sweepHarness{t: t, ctx: ctx, db: db, clk: clk, c: &Sweeps{DB: db, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

// submit stores a sweep as the server does: validated, with no compute
// of its own.
func (h *sweepHarness) submit(name string, mut func(p *api.JobProperties)) {
	h.t.Helper()
	seed := int64(3)
	j := api.Job{Name: name, ID: sweepWS + "/jobs/" + name, Properties: api.JobProperties{JobType: "sweep",
		ComputeID:         sweepWS + "/computes/cpu",
		Trial:             &api.TrialComponent{Command: "python train.py --x ${{search_space.x}} --y ${{search_space.y}}"},
		SearchSpace:       map[string]any{"x": []any{"choice", []any{[]any{1.0, 2.0, 3.0}}}, "y": []any{"choice", []any{[]any{10.0, 20.0}}}},
		SamplingAlgorithm: &api.SamplingAlgorithm{SamplingAlgorithmType: "grid", Seed: &seed},
		Objective:         &api.Objective{Goal: "maximize", PrimaryMetric: "acc"},
		Limits:            &api.JobLimits{MaxTotalTrials: 6, MaxConcurrentTrials: 3},
	}}
	if mut != nil {
		mut(&j.Properties)
	}
	if err := api.PrepareJob(&j, name); err != nil {
		h.t.Fatal(err)
	}
	j.Properties.Sweep = &api.SweepStatus{Seed: 3}
	sc, _, err := api.ParseJobID(j.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := store.Get[api.Compute](h.ctx, h.db.Q(), store.KindCompute, sweepWS, "cpu"); errors.Is(err, store.ErrNotFound) {
		max := int32(3)
		c := api.Compute{Name: "cpu", Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
			Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: &max}}}}
		if err := api.PrepareCompute(&c, "cpu", nil, "local"); err != nil {
			h.t.Fatal(err)
		}
		c.ID, c.Properties.ProvisioningState = sc.ComputeID("cpu"), api.StateSucceeded
		if _, err := store.Put(h.ctx, h.db.W(), store.KindCompute, sweepWS, "cpu", c, 0, h.clk.Now()); err != nil {
			h.t.Fatal(err)
		}
	}
	err = h.db.Tx(h.ctx, func(q store.Querier) error {
		_, _, err := lifecycle.Submit(h.ctx, q, lifecycle.Submission{Workspace: sc, Name: name, Job: j, Principal: "alice"}, h.clk.Now())
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *sweepHarness) pass() {
	h.t.Helper()
	if err := h.c.RunOnce(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

func (h *sweepHarness) job(name string) store.Job {
	h.t.Helper()
	j, err := store.GetJob(h.ctx, h.db.Q(), sweepWS, name)
	if err != nil {
		h.t.Fatalf("job %s: %v", name, err)
	}
	return j
}

// log records values of acc for a trial, one per step.
func (h *sweepHarness) log(name string, values ...float64) {
	h.t.Helper()
	j := h.job(name)
	old, _ := store.Metrics(h.ctx, h.db.Q(), j.UID, "acc")
	var ms []store.Metric
	for i, v := range values {
		ms = append(ms, store.Metric{Name: "acc", Value: v, Step: int64(len(old) + i), Time: h.clk.Now()})
	}
	if err := store.PutMetrics(h.ctx, h.db.W(), j.UID, ms); err != nil {
		h.t.Fatal(err)
	}
}

func (h *sweepHarness) end(name, status string) {
	h.t.Helper()
	j := h.job(name)
	j.Doc.SetStatus(status, h.clk.Now(), "")
	if err := store.UpdateJob(h.ctx, h.db.W(), &j); err != nil {
		h.t.Fatal(err)
	}
}

func (h *sweepHarness) status(name string) string { return h.job(name).Doc.Properties.Status }

// TestSweepGrid: trials come max_concurrent_trials at a time with the
// grid's parameters bound into their command, new ones as others end;
// the sweep completes with the best trial when all are done.
func TestSweepGrid(t *testing.T) {
	h := newSweepHarness(t)
	h.submit("sw", nil)
	h.pass()
	if h.status("sw") != api.JobRunning {
		t.Fatalf("sweep %s", h.status("sw"))
	}
	for i := range 3 {
		tj := h.job(api.TrialName("sw", i))
		if tj.Compute != store.Key(sweepWS+"/computes/cpu") || tj.Doc.Properties.Status != api.JobQueued || tj.Doc.Properties.ParentJobName != "sw" {
			t.Fatalf("trial %d: %+v", i, tj)
		}
	}
	if _, err := store.GetJob(h.ctx, h.db.Q(), sweepWS, "sw_3"); err == nil {
		t.Fatal("a 4th trial beyond max_concurrent_trials")
	}
	if got := h.job("sw_1").Doc.Properties.Command; got != "python train.py --x 1 --y 20" {
		t.Errorf("trial 1's command: %q", got)
	}
	// acc = x*y: the best of the grid is x=3, y=20 (trial 5).
	for round := range 2 {
		for i := 3 * round; i < 3*round+3; i++ {
			p := h.job(api.TrialName("sw", i)).Doc.Properties.Parameters
			h.log(api.TrialName("sw", i), p["x"].(float64)*p["y"].(float64))
			h.end(api.TrialName("sw", i), api.JobCompleted)
		}
		h.pass()
	}
	sw := h.job("sw")
	p := sw.Doc.Properties
	if p.Status != api.JobCompleted || p.Sweep.TrialsCreated != 6 || p.Sweep.BestTrial == nil || p.Sweep.BestTrial.Name != "sw_5" ||
		p.Sweep.BestTrial.Value != 60 || p.Properties["best_child_run_id"] != "sw_5" {
		t.Fatalf("sweep: %s %+v %+v", p.Status, p.Sweep, p.Sweep.BestTrial)
	}
}

// TestSweepBandit: a trial that falls behind the best by more than the
// slack is canceled and does not count against the running trials.
func TestSweepBandit(t *testing.T) {
	h := newSweepHarness(t)
	h.submit("sw", func(p *api.JobProperties) {
		slack := 0.2
		p.EarlyTermination = &api.EarlyTerminationPolicy{PolicyType: "bandit", SlackFactor: &slack, EvaluationInterval: 1, DelayEvaluation: 1}
	})
	h.pass()
	h.log("sw_0", 0.5, 0.9)
	h.log("sw_1", 0.5, 0.8)
	h.log("sw_2", 0.5, 0.6) // 0.6 < 0.9/1.2
	h.pass()
	if h.status("sw_2") != api.JobCanceled || h.status("sw_1") != api.JobQueued {
		t.Fatalf("sw_1 %s, sw_2 %s", h.status("sw_1"), h.status("sw_2"))
	}
	if p := h.job("sw").Doc.Properties; len(p.Sweep.StoppedEarly) != 1 || p.Sweep.TrialsCreated != 4 {
		t.Fatalf("sweep status %+v", p.Sweep)
	}
}

// TestSweepCancelAndTimeout: canceling a sweep cancels its trials; a
// sweep past limits.timeout (on the injected clock) stops its trials.
func TestSweepCancelAndTimeout(t *testing.T) {
	h := newSweepHarness(t)
	h.submit("a", nil)
	h.submit("b", func(p *api.JobProperties) { p.Limits.Timeout = "PT1H" })
	h.pass()
	a := h.job("a")
	a.Doc.SetStatus(api.JobCancelRequested, h.clk.Now(), "")
	if err := store.UpdateJob(h.ctx, h.db.W(), &a); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(59 * time.Minute)
	h.pass()
	if h.status("a") != api.JobCanceled || h.status("a_0") != api.JobCanceled || h.status("a_2") != api.JobCanceled {
		t.Fatalf("canceled sweep: %s, trials %s %s", h.status("a"), h.status("a_0"), h.status("a_2"))
	}
	if h.status("b") != api.JobRunning {
		t.Fatalf("b before its timeout: %s", h.status("b"))
	}
	h.clk.Step(time.Minute)
	h.pass()
	if h.status("b") != api.JobCanceled || h.status("b_1") != api.JobCanceled {
		t.Fatalf("b after its timeout: %s, trial %s", h.status("b"), h.status("b_1"))
	}
}

// TestSweepRandomRepeatable: the same seed gives the same trials; a
// preempted trial (queued again) stays the same trial.
func TestSweepRandomRepeatable(t *testing.T) {
	h := newSweepHarness(t)
	space := func(p *api.JobProperties) {
		p.SearchSpace = map[string]any{"x": []any{"uniform", []any{0.0, 1.0}}, "y": []any{"randint", []any{100.0}}}
		p.SamplingAlgorithm.SamplingAlgorithmType = "random"
	}
	h.submit("a", space)
	h.submit("b", space)
	h.pass()
	for i := range 3 {
		pa, pb := h.job(api.TrialName("a", i)).Doc.Properties.Parameters, h.job(api.TrialName("b", i)).Doc.Properties.Parameters
		if pa["x"] != pb["x"] || pa["y"] != pb["y"] || math.IsNaN(pa["x"].(float64)) {
			t.Errorf("trial %d: %v vs %v", i, pa, pb)
		}
	}
	// A trial queued again after a preemption is still trial a_0.
	h.end("a_0", api.JobQueued)
	h.pass()
	if p := h.job("a").Doc.Properties; p.Sweep.TrialsCreated != 3 {
		t.Errorf("a requeued trial made a new one: %d trials", p.Sweep.TrialsCreated)
	}
}

// TestSweepPicksTrialsOutsideTheWriteTransaction: the optimizer runs with
// no transaction open, so that another workspace's write goes through
// while it works (before, a Bayesian pass over a large space held the
// store's writer for a minute and another workspace's job start waited);
// trials picked for a sweep that changed meanwhile are dropped and picked
// again at the next pass.
func TestSweepPicksTrialsOutsideTheWriteTransaction(t *testing.T) {
	h := newSweepHarness(t)
	h.submit("sw", nil)
	var writeErr error
	other := 0
	change := func() {}
	h.c.next = func(r sweep.Request) []sweep.Params {
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		defer cancel()
		other++
		j := &store.Job{UID: fmt.Sprintf("other-%d", other), Parent: "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/other",
			Created: h.clk.Now(), Doc: api.Job{Name: fmt.Sprintf("other-%d", other)}}
		j.Doc.SetStatus(api.JobQueued, h.clk.Now(), "")
		if err := h.db.Tx(ctx, func(q store.Querier) error { return store.InsertJob(ctx, q, j) }); err != nil && writeErr == nil {
			writeErr = err
		}
		change()
		return sweep.Next(r)
	}
	h.pass()
	if writeErr != nil {
		t.Fatalf("a write while the sweep's trials were picked: %v", writeErr)
	}
	if n := h.job("sw").Doc.Properties.Sweep.TrialsCreated; n != 3 {
		t.Fatalf("%d trials created, want 3", n)
	}
	// A trial ends while the next one is picked: the pick is dropped.
	h.log("sw_0", 1)
	h.log("sw_1", 2)
	h.end("sw_1", api.JobCompleted)
	change = func() { h.end("sw_0", api.JobCompleted) }
	h.pass()
	if n := h.job("sw").Doc.Properties.Sweep.TrialsCreated; n != 3 {
		t.Fatalf("%d trials created from a pick the sweep outran, want still 3", n)
	}
	change = func() {}
	h.pass()
	if n := h.job("sw").Doc.Properties.Sweep.TrialsCreated; n != 5 {
		t.Fatalf("%d trials created at the next pass, want 5", n)
	}
}
