package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// PipelineView is what a pipeline adds to `job show`: its steps in the
// order they run, each with its job and status.
type PipelineView struct {
	Settings *pipelineSettingsView `json:"settings,omitempty"`
	Steps    []stepView            `json:"steps,omitempty"`
}

type pipelineSettingsView struct {
	DefaultCompute        string `json:"default_compute,omitempty"`
	ContinueOnStepFailure bool   `json:"continue_on_step_failure,omitempty"`
}

type stepView struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Job    string   `json:"job,omitempty"`
	Status string   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	After  []string `json:"after,omitempty"`
}

// ParallelView is a parallel step's settings and progress in `job show`.
type ParallelView struct {
	InputData               string              `json:"input_data"`
	MiniBatchSize           string              `json:"mini_batch_size"`
	MaxConcurrency          int32               `json:"max_concurrency_per_instance,omitempty"`
	ErrorThreshold          int32               `json:"error_threshold"`
	MiniBatchErrorThreshold int32               `json:"mini_batch_error_threshold"`
	Progress                *api.ParallelStatus `json:"progress,omitempty"`
}

func pipelineViewOf(j api.Job) *PipelineView {
	p := j.Properties
	if !j.IsPipeline() {
		return nil
	}
	v := &PipelineView{}
	if s := p.Settings; s != nil {
		v.Settings = &pipelineSettingsView{ContinueOnStepFailure: s.ContinueOnStepFailure}
		if s.DefaultCompute != "" {
			v.Settings.DefaultCompute = "azureml:" + s.DefaultCompute[strings.LastIndex(s.DefaultCompute, "/")+1:]
		}
	}
	for _, name := range stepOrder(j) {
		s := p.Jobs[name]
		sv := stepView{Name: name, Status: api.JobNotStarted}
		if s != nil {
			sv.Type = s.Type
		}
		if st := p.Pipeline; st != nil && st.Steps[name] != nil {
			ss := st.Steps[name]
			sv.Job, sv.Status, sv.Reason, sv.After = ss.Job, ss.Status, ss.Reason, ss.After
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}

// stepOrder is a pipeline's steps in the order they run (by name before
// its controller has ordered them).
func stepOrder(j api.Job) []string {
	if st := j.Properties.Pipeline; st != nil && len(st.Order) > 0 {
		return st.Order
	}
	var names []string
	for n := range j.Properties.Jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func parallelViewOf(j api.Job) *ParallelView {
	spec := j.Properties.ParallelSpec
	if !j.IsParallel() || spec == nil {
		return nil
	}
	v := &ParallelView{InputData: spec.InputData, MiniBatchSize: string(spec.MiniBatchSize), MaxConcurrency: spec.MaxConcurrencyPerInstance,
		ErrorThreshold: -1, MiniBatchErrorThreshold: -1, Progress: spec.Parallel}
	if spec.ErrorThreshold != nil {
		v.ErrorThreshold = *spec.ErrorThreshold
	}
	if spec.MiniBatchErrorThreshold != nil {
		v.MiniBatchErrorThreshold = *spec.MiniBatchErrorThreshold
	}
	return v
}

// stepsTable is a pipeline's steps: name, type, status, job, why.
func stepsTable(j api.Job) *table {
	t := &table{header: []string{"STEP", "TYPE", "STATUS", "JOB", "AFTER", "REASON"}}
	for _, s := range pipelineViewOf(j).Steps {
		t.add(s.Name, orDash(s.Type), s.Status, orDash(s.Job), orDash(strings.Join(s.After, ",")), orDash(s.Reason))
	}
	return t
}

// parallelLine words a parallel step's progress for `job show`.
func parallelLine(st *api.ParallelStatus) string {
	if st == nil {
		return "Mini-batches: not planned yet (the step's nodes split input_data when they start)"
	}
	line := fmt.Sprintf("Mini-batches: %d of %d done, %d failed, %d running, %d pending, %d retried; %d items",
		st.Done, st.MiniBatches, st.Failed, st.Running, st.Pending, st.Retried, st.Items)
	if st.PerSecond > 0 {
		line += fmt.Sprintf("; %.2f mini-batches/s", st.PerSecond)
	}
	if st.SecondsLeft != nil && st.Done+st.Failed < st.MiniBatches {
		line += fmt.Sprintf(", about %s left", time.Duration(*st.SecondsLeft)*time.Second)
	}
	return line
}

// failuresTable lists a parallel step's failed mini-batches.
func failuresTable(st *api.ParallelStatus) *table {
	t := &table{header: []string{"MINI-BATCH", "TRIES", "ITEMS", "ERROR"}}
	for _, f := range st.Failures {
		items := strings.Join(f.Items, ", ")
		if len(items) > 80 {
			items = items[:77] + "..."
		}
		t.add(f.Index, f.Tries, items, f.Error)
	}
	return t
}

// listSteps is 'job list --parent PIPELINE': its steps' jobs.
func (g *globals) listSteps(ctx context.Context, c *client.Client, pj api.Job, status string) error {
	jobs, err := c.ListTrials(ctx, pj.Name)
	if err != nil {
		return err
	}
	if status != "" {
		jobs = slices.DeleteFunc(jobs, func(j api.Job) bool { return !strings.EqualFold(j.Properties.Status, status) })
	}
	views := make([]JobView, 0, len(jobs))
	for _, j := range jobs {
		views = append(views, jobFromARM(j, c.Server()))
	}
	return g.show("table", views, func() *table {
		t := jobTable()
		for _, j := range jobs {
			addJobRow(t, j)
		}
		return t
	})
}

// streamPipeline follows a pipeline: each step's log in the order the
// steps run, each after a line naming it, until the pipeline ends; exit 0
// only if it Completed.
func streamPipeline(ctx context.Context, g *globals, c *client.Client, name string) error {
	done := map[string]bool{}
	for {
		pj, err := c.GetJob(ctx, name)
		if err != nil {
			return err
		}
		progressed := false
		for _, step := range stepOrder(pj) {
			if done[step] {
				continue
			}
			var ss *api.StepStatus
			if st := pj.Properties.Pipeline; st != nil {
				ss = st.Steps[step]
			}
			if ss == nil || ss.Job == "" {
				if ss != nil && ss.Reason != "" && (api.JobTerminal(pj.Properties.Status) || strings.HasPrefix(ss.Reason, "not run")) {
					fmt.Fprintf(g.stderr, "=== step %s: %s\n", step, ss.Reason)
					done[step] = true
					progressed = true
					continue
				}
				break // it waits for the steps before it
			}
			fmt.Fprintf(g.stderr, "=== step %s (job %s)\n", step, ss.Job)
			if err := streamJob(ctx, g, c, ss.Job); err != nil && ctx.Err() == nil {
				var ae *api.Error
				if errors.As(err, &ae) {
					return err
				}
				fmt.Fprintf(g.stderr, "%s\n", err)
			}
			done[step] = true
			progressed = true
		}
		if progressed {
			continue
		}
		if api.JobTerminal(pj.Properties.Status) {
			p := pj.Properties
			fmt.Fprintf(g.stderr, "Pipeline %s %s%s\n", name, p.Status, suffix(p.StatusMessage))
			if p.Status == api.JobCompleted {
				return nil
			}
			return fmt.Errorf("pipeline %s %s%s", name, strings.ToLower(p.Status), suffix(p.StatusMessage))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
