package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/sweep"
)

// SweepInterval is how often every running sweep is driven even when
// nothing wakes the controller.
const SweepInterval = 5 * time.Second

// sweepWakeGap is the least time between two passes asked for by Notify.
const sweepWakeGap = time.Second

// Sweeps drives sweep jobs: it creates their trials (command jobs on the
// sweep's compute, which the scheduler and autoscaler run like any other)
// up to maxConcurrentTrials at a time and maxTotalTrials in all, with the
// parameters the sampling algorithm picks from the results so far; stops
// trials the early termination policy names; keeps the best trial; and
// ends the sweep when its trials are done or its timeout passes. Each
// sweep's pass is one transaction that writes the sweep back under its
// version, so a pass that raced a cancel leaves no trial behind.
type Sweeps struct {
	DB    *store.DB
	Clock clock.Clock
	Log   *slog.Logger
	// Changed is told when trials were created or canceled (wakes the
	// clusters); Wake wakes a node's poll (a canceled trial's nodes).
	Changed func()
	Wake    func(node string)

	wake wakeup
	next func(sweep.Request) []sweep.Params // sweep.Next; tests watch it
}

// Notify asks for a pass soon (jobs changed).
func (c *Sweeps) Notify() { c.wake.notify() }

// Run drives the sweeps every SweepInterval and soon after Notify, until
// ctx ends.
func (c *Sweeps) Run(ctx context.Context) {
	runPasses(ctx, c.Clock, SweepInterval, sweepWakeGap, &c.wake, c.Log, "drive sweeps", c.RunOnce)
}

// activeSweep lists the statuses of a sweep that is not over.
var activeSweep = []string{api.JobNotStarted, api.JobQueued, api.JobRunning, api.JobCancelRequested, api.JobFinalizing}

// RunOnce drives every sweep that is not over once.
func (c *Sweeps) RunOnce(ctx context.Context) error {
	sweeps, err := store.JobsByStatus(ctx, c.DB.Q(), "", activeSweep...)
	if err != nil {
		return err
	}
	var errs []error
	for _, sw := range sweeps {
		if !sw.Doc.IsSweep() {
			continue
		}
		res, err := c.pass(ctx, sw.UID)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", sw.Doc.Name, err))
			continue
		}
		if c.Wake != nil {
			for _, n := range res.wake {
				c.Wake(n)
			}
		}
		if res.changed && c.Changed != nil {
			c.Changed()
		}
	}
	return errors.Join(errs...)
}

// pass drives one sweep. Picking new trials' parameters (a Bayesian pass
// takes up to a second of CPU) is done between two transactions, not in
// one: the store's writer is never held while the optimizer runs, so no
// other workspace's write waits for it. The first transaction does the
// rest of the pass and says what it would pick; the second creates the
// trials picked, unless the sweep changed meanwhile (the next pass picks
// again).
func (c *Sweeps) pass(ctx context.Context, uid string) (passResult, error) {
	var res passResult
	var asked *sweep.Request
	err := c.DB.Tx(ctx, func(q store.Querier) error {
		asked = nil
		var err error
		res, err = c.drive(ctx, q, uid, c.Clock.Now().UTC(), func(r sweep.Request) []sweep.Params { asked = &r; return nil })
		return err
	})
	if err != nil || asked == nil {
		return res, err
	}
	next := c.next
	if next == nil {
		next = sweep.Next
	}
	picked := next(*asked)
	var more passResult
	err = c.DB.Tx(ctx, func(q store.Querier) error {
		var err error
		more, err = c.drive(ctx, q, uid, c.Clock.Now().UTC(), func(r sweep.Request) []sweep.Params {
			if r.Issued != asked.Issued || len(r.Done) != len(asked.Done) || len(r.Pending) != len(asked.Pending) {
				return nil
			}
			return picked[:min(len(picked), r.N)]
		})
		return err
	})
	res.changed = res.changed || more.changed
	res.wake = append(res.wake, more.wake...)
	return res, err
}

type passResult struct {
	changed bool     // trials created or canceled
	wake    []string // nodes of canceled trials
	again   bool     // work waits on what this pass did not see: pass again soon
}

// trial is one trial of a sweep with its primary metric so far.
type trial struct {
	job    store.Job
	values []float64 // the primary metric, by step
}

func (t trial) active() bool { return !api.JobTerminal(t.job.Doc.Properties.Status) }

// drive is one pass over one sweep, inside the caller's transaction.
// pick gives the parameters of the trials a request asks for (see pass).
func (c *Sweeps) drive(ctx context.Context, q store.Querier, uid string, now time.Time, pick func(sweep.Request) []sweep.Params) (passResult, error) {
	var res passResult
	sw, err := store.GetJobByUID(ctx, q, uid)
	if err != nil || api.JobTerminal(sw.Doc.Properties.Status) {
		return res, ignoreNotFound(err)
	}
	p := &sw.Doc.Properties
	if p.Sweep == nil {
		p.Sweep = &api.SweepStatus{}
	}
	st := p.Sweep
	space, err := sw.Doc.SweepSpace()
	if err != nil { // checked at submission; a stored sweep that no longer parses fails
		return res, lifecycle.ParentEnded(ctx, q, &sw, api.JobFailed, "searchSpace: "+err.Error(), now)
	}
	trials, err := c.trials(ctx, q, sw)
	if err != nil {
		return res, err
	}
	maximize := p.Objective.Goal == api.GoalMaximize
	cancel := func(t *trial, reason string) error {
		res.changed = true
		res.wake = append(res.wake, t.job.Nodes...)
		return lifecycle.CancelBecause(ctx, q, &t.job, reason, now)
	}

	// A canceled sweep (CancelRequested: see the server) or one past its
	// timeout stops its trials.
	timedOut := false
	if d := sw.Doc.Timeout(); d > 0 && p.StartTime != nil && !now.Before(p.StartTime.Add(d)) {
		timedOut = true
	}
	if p.Status == api.JobCancelRequested || timedOut {
		reason := "the sweep was canceled"
		if timedOut {
			reason = "the sweep reached its limits.timeout (" + p.Limits.Timeout + ")"
		}
		for i := range trials {
			if trials[i].active() {
				if err := cancel(&trials[i], reason); err != nil {
					return res, err
				}
			}
		}
		best(p, trials)
		return res, lifecycle.ParentEnded(ctx, q, &sw, api.JobCanceled, reason, now)
	}

	// Early termination.
	if e := p.EarlyTermination; e != nil {
		var series []sweep.TrialSeries
		for _, t := range trials {
			series = append(series, sweep.TrialSeries{Name: t.job.Doc.Name, Values: t.values,
				Running: t.active() && t.job.Doc.Properties.Status != api.JobCancelRequested})
		}
		stop := sweep.Terminate(e.SweepPolicy(), maximize, series)
		for i := range trials {
			t := &trials[i]
			if !slices.Contains(stop, t.job.Doc.Name) {
				continue
			}
			reason := fmt.Sprintf("stopped early by the sweep's %s policy: %s %g at interval %d is behind", e.PolicyType,
				p.Objective.PrimaryMetric, t.values[len(t.values)-1], len(t.values))
			if err := cancel(t, reason); err != nil {
				return res, err
			}
			st.StoppedEarly = append(st.StoppedEarly, t.job.Doc.Name)
		}
	}

	// New trials, as many as the limits allow.
	alg := strings.ToLower(p.SamplingAlgorithm.SamplingAlgorithmType)
	total := sw.Doc.MaxTotalTrials()
	if alg == sweep.Grid {
		total = min(total, sweep.GridSize(space))
	}
	active := 0
	var done []sweep.Observation
	var pending []sweep.Params
	for _, t := range trials {
		if t.active() {
			active++
			pending = append(pending, t.job.Doc.Properties.Parameters)
		} else if len(t.values) > 0 {
			done = append(done, sweep.Observation{Params: t.job.Doc.Properties.Parameters, Value: t.values[len(t.values)-1]})
		}
	}
	n := min(sw.Doc.MaxConcurrentTrials()-active, total-st.TrialsCreated)
	started := false
	if n > 0 {
		next := pick(sweep.Request{Space: space, Algorithm: sweep.Algorithm{Type: alg, Seed: st.Seed}, Maximize: maximize,
			Done: done, Pending: pending, Issued: st.TrialsCreated, N: n})
		ws, _, err := api.ParseJobID(sw.Doc.ID)
		if err != nil {
			return res, err
		}
		for _, params := range next {
			name := api.TrialName(sw.Doc.Name, st.TrialsCreated)
			_, _, err := lifecycle.Submit(ctx, q, lifecycle.Submission{Workspace: ws, Name: name, Job: sw.Doc.Trial(name, params), Parent: &sw}, now)
			if errors.Is(err, store.ErrExists) {
				return res, lifecycle.ParentEnded(ctx, q, &sw, api.JobFailed, "a job named "+name+" already exists, so the sweep cannot create its trial "+name, now)
			}
			var refused *api.Error
			if errors.As(err, &refused) { // its compute is gone or can no longer hold a trial
				return res, lifecycle.ParentEnded(ctx, q, &sw, api.JobFailed, "trial "+name+": "+refused.Message, now)
			}
			if err != nil {
				return res, err
			}
			st.TrialsCreated++
			active++
			res.changed = true
		}
		started = len(next) > 0
	}
	best(p, trials)
	if active == 0 && st.TrialsCreated >= total {
		status, reason := api.JobCompleted, ""
		if p.Sweep.BestTrial == nil {
			status, reason = api.JobFailed, "no trial logged the primary metric "+p.Objective.PrimaryMetric
		}
		return res, lifecycle.ParentEnded(ctx, q, &sw, status, reason, now)
	}
	if started {
		return res, lifecycle.ParentRunning(ctx, q, &sw, now)
	}
	return res, store.UpdateJob(ctx, q, &sw)
}

// trials reads a sweep's trials and the primary metric each has logged.
func (c *Sweeps) trials(ctx context.Context, q store.Querier, sw store.Job) ([]trial, error) {
	var out []trial
	metric := sw.Doc.Properties.Objective.PrimaryMetric
	for i := range sw.Doc.Properties.Sweep.TrialsCreated {
		j, err := store.GetJob(ctx, q, sw.Parent, api.TrialName(sw.Doc.Name, i))
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		if j.Doc.Properties.ParentJobName != sw.Doc.Name {
			continue
		}
		ms, err := store.Metrics(ctx, q, j.UID, metric)
		if err != nil {
			return nil, err
		}
		t := trial{job: j}
		for k, m := range ms { // the last value logged at each step
			if k+1 < len(ms) && ms[k+1].Step == m.Step {
				continue
			}
			t.values = append(t.values, m.Value)
		}
		out = append(out, t)
	}
	return out, nil
}

// best records the sweep's best trial: the best latest value of the
// primary metric; also in properties as Azure ML's sweeps do
// (best_child_run_id, score).
func best(p *api.JobProperties, trials []trial) {
	maximize := p.Objective.Goal == api.GoalMaximize
	var b *trial
	for i := range trials {
		t := &trials[i]
		if len(t.values) == 0 {
			continue
		}
		v := t.values[len(t.values)-1]
		if b == nil || (maximize && v > b.values[len(b.values)-1]) || (!maximize && v < b.values[len(b.values)-1]) {
			b = t
		}
	}
	if b == nil {
		return
	}
	v := b.values[len(b.values)-1]
	p.Sweep.BestTrial = &api.BestTrial{Name: b.job.Doc.Name, Parameters: b.job.Doc.Properties.Parameters, Metric: p.Objective.PrimaryMetric, Value: v}
	if p.Properties == nil {
		p.Properties = map[string]string{}
	}
	p.Properties["best_child_run_id"] = b.job.Doc.Name
	p.Properties["score"] = fmt.Sprint(v)
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
