package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/jobdata"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/pipeline"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// PipelineInterval is how often every running pipeline is driven even when
// nothing wakes the controller.
const PipelineInterval = 5 * time.Second

// Pipelines drives pipeline jobs: it creates each step's job (a command,
// sweep or parallel job on the step's compute, which the scheduler and
// autoscaler then run like any other) once every step it reads from has
// completed, with those steps' outputs as its inputs; cancels the running
// steps when the pipeline is canceled or a step fails (unless
// continue_on_step_failure); and ends the pipeline when its steps are
// over. Each pipeline's pass is one transaction that writes the pipeline
// back under its version, with the steps it created: a restart (or another
// replica taking over) finds every step it made, and never makes one twice.
type Pipelines struct {
	DB    *store.DB
	Clock clock.Clock
	Log   *slog.Logger
	// Outputs are the jobs' outputs, and Blobs where a completed step's
	// outputs become the inputs of the steps after it.
	Outputs files.Outputs
	Blobs   files.Blobs
	// Changed is told when steps were created or canceled; Wake wakes a
	// node's poll (a canceled step's nodes).
	Changed func()
	Wake    func(node string)

	wake wakeup
}

// Notify asks for a pass soon (jobs changed).
func (c *Pipelines) Notify() { c.wake.notify() }

// Run drives the pipelines every PipelineInterval and soon after Notify,
// until ctx ends.
func (c *Pipelines) Run(ctx context.Context) {
	runPasses(ctx, c.Clock, PipelineInterval, sweepWakeGap, &c.wake, c.Log, "drive pipelines", c.RunOnce)
}

// RunOnce drives every pipeline that is not over once.
func (c *Pipelines) RunOnce(ctx context.Context) error {
	jobs, err := store.JobsByStatus(ctx, c.DB.Q(), "", activeSweep...)
	if err != nil {
		return err
	}
	var errs []error
	for _, pj := range jobs {
		if !pj.Doc.IsPipeline() {
			continue
		}
		outputs, err := c.stepOutputs(ctx, pj)
		if err != nil {
			errs = append(errs, fmt.Errorf("pipeline %s: %w", pj.Doc.Name, err))
			continue
		}
		var res passResult
		err = c.DB.Tx(ctx, func(q store.Querier) error {
			var err error
			res, err = c.drive(ctx, q, pj.UID, outputs, c.Clock.Now().UTC())
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("pipeline %s: %w", pj.Doc.Name, err))
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
		if res.again {
			c.Notify()
		}
	}
	return errors.Join(errs...)
}

// outputKey names one output of one step.
type outputKey struct{ step, output string }

// stepOutputs finds where the outputs of the completed steps that later
// steps read, and that the pipeline has not recorded yet, are (outside the
// pass's transaction: a snapshot is content-addressed, so making it twice
// is harmless). A step that wrote nothing to an output gives an empty
// folder.
func (c *Pipelines) stepOutputs(ctx context.Context, pj store.Job) (map[outputKey]string, error) {
	st := pj.Doc.Properties.Pipeline
	if st == nil {
		return nil, nil
	}
	out := map[outputKey]string{}
	for k := range stepReads(pj.Doc) {
		ss := st.Steps[k.step]
		if ss == nil || ss.Job == "" || ss.Outputs[k.output] != "" {
			continue
		}
		child, err := store.GetJob(ctx, c.DB.Q(), pj.Parent, ss.Job)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if child.Doc.Properties.Status != api.JobCompleted {
			continue
		}
		if sw := child.Doc.Properties.Sweep; child.Doc.IsSweep() && sw != nil && sw.BestTrial != nil {
			// A sweep step's outputs are its best trial's, as in Azure ML.
			best, err := store.GetJob(ctx, c.DB.Q(), pj.Parent, sw.BestTrial.Name)
			if err != nil {
				return nil, fmt.Errorf("step %s: best trial %s: %w", k.step, sw.BestTrial.Name, err)
			}
			child = best
		}
		uri, err := c.outputURI(ctx, child, k.output)
		if err != nil {
			return nil, fmt.Errorf("step %s: output %s: %w", k.step, k.output, err)
		}
		out[k] = uri
	}
	return out, nil
}

// stepReads lists the outputs of other steps that the pipeline's steps
// read.
func stepReads(pipeline api.Job) map[outputKey]bool {
	read := map[outputKey]bool{}
	for _, s := range pipeline.Properties.Jobs {
		for _, in := range s.Inputs {
			if step, out, ok := stepRef(in); ok {
				read[outputKey{step, out}] = true
			}
		}
	}
	return read
}

// outputURI is where the steps after a completed step read one of its
// outputs: its datastore path, where its nodes' files were filed (Azure's
// azureml://datastores/workspaceblobstore/paths/azureml/<job>/<output>/);
// or, for an output that path does not hold whole — a parallel step's,
// whose rows file the control plane writes, or one the step wrote nothing
// to — a snapshot of it in the workspace's blobs.
func (c *Pipelines) outputURI(ctx context.Context, j store.Job, name string) (string, error) {
	if o := j.Doc.Properties.Outputs[name]; o.BlobPath != nil && !j.Doc.IsParallel() {
		sc, err := api.ParseWorkspaceID(strings.TrimSuffix(j.Doc.ID, "/jobs/"+j.Doc.Name))
		if err != nil {
			return "", err
		}
		w, err := store.Get[api.Workspace](ctx, c.DB.Q(), store.KindWorkspace, sc.GroupID(), sc.Workspace)
		if err != nil {
			return "", err
		}
		src := jobdata.Store{Q: c.DB.Q(), Scope: sc, Workspace: w.Value}
		container, err := jobdata.Container(ctx, src, *o.BlobPath)
		if err != nil {
			return "", err
		}
		filed, err := src.Exists(ctx, container, o.BlobPath.Path, true)
		if err != nil {
			return "", err
		}
		if filed {
			return o.URI, nil
		}
	}
	if err := dispatch.WriteRows(ctx, c.DB.Q(), c.Outputs, j); err != nil {
		return "", fmt.Errorf("rows: %w", err)
	}
	digest, err := c.outputBlob(j, name)
	if err != nil {
		return "", err
	}
	return api.BlobURIScheme + digest, nil
}

// stepRef reads an input bound to ${{parent.jobs.<step>.outputs.<o>}}.
func stepRef(in api.JobInput) (step, output string, ok bool) {
	for _, v := range []string{in.Value, in.URI} {
		t := strings.TrimSpace(v)
		if r, found := strings.CutPrefix(t, "${{parent.jobs."); found {
			r = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(r, "}}")), " ")
			if s, o, found := strings.Cut(r, ".outputs."); found {
				return s, o, true
			}
		}
	}
	return "", "", false
}

// outputBlob stores a job's output (its ranks merged) as a blob and
// returns its digest.
func (c *Pipelines) outputBlob(j store.Job, name string) (string, error) {
	var r io.ReadSeeker
	f, err := c.Outputs.Open(j.UID, name, dispatch.EmptyParts(j, name)...)
	switch {
	case errors.Is(err, files.ErrNotFound):
		r = files.EmptyArchive() // a step that uploaded nothing passes an empty folder on
	case err != nil:
		return "", err
	default:
		defer f.Close()
		r = f
	}
	h := sha256.New()
	size, err := io.Copy(h, r)
	if err != nil {
		return "", err
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := c.Blobs.Put(digest, r, size); err != nil {
		return "", err
	}
	return digest, nil
}

// drive is one pass over one pipeline, inside the caller's transaction.
func (c *Pipelines) drive(ctx context.Context, q store.Querier, uid string, outputs map[outputKey]string, now time.Time) (passResult, error) {
	var res passResult
	pj, err := store.GetJobByUID(ctx, q, uid)
	if err != nil || api.JobTerminal(pj.Doc.Properties.Status) {
		return res, ignoreNotFound(err)
	}
	p := &pj.Doc.Properties
	order, err := pj.Doc.StepOrder()
	if err != nil { // checked at submission
		return res, lifecycle.ParentEnded(ctx, q, &pj, api.JobFailed, "jobs: "+err.Error(), now)
	}
	if p.Pipeline == nil {
		p.Pipeline = &api.PipelineStatus{Steps: map[string]*api.StepStatus{}}
		for _, s := range order {
			p.Pipeline.Order = append(p.Pipeline.Order, s.Name)
			p.Pipeline.Steps[s.Name] = &api.StepStatus{Status: api.JobNotStarted, After: s.After}
		}
	}
	st := p.Pipeline
	ws, _, err := api.ParseJobID(pj.Doc.ID)
	if err != nil {
		return res, err
	}
	for k, uri := range outputs {
		ss := st.Steps[k.step]
		if ss.Outputs == nil {
			ss.Outputs = map[string]string{}
		}
		ss.Outputs[k.output] = uri
		if digest, ok := strings.CutPrefix(uri, api.BlobURIScheme); ok {
			if err := store.PutBlobOwner(ctx, q, store.BlobOwner{Digest: digest, Workspace: ws.WorkspaceID(), Uploaded: now, Principal: "pipeline " + pj.Doc.Name}); err != nil {
				return res, err
			}
		}
	}
	children := map[string]*store.Job{}
	states := map[string]pipeline.State{}
	for _, s := range order {
		ss := st.Steps[s.Name]
		if ss.Job == "" {
			continue
		}
		child, err := store.GetJob(ctx, q, pj.Parent, ss.Job)
		if errors.Is(err, store.ErrNotFound) { // deleted since: it did not complete
			ss.Status, ss.Reason = api.JobCanceled, "its job "+ss.Job+" was deleted"
			states[s.Name] = pipeline.State{Created: true, Status: ss.Status}
			continue
		}
		if err != nil {
			return res, err
		}
		children[s.Name] = &child
		ss.Status, ss.Reason = child.Doc.Properties.Status, child.Doc.Properties.StatusMessage
		states[s.Name] = pipeline.State{Created: true, Status: ss.Status}
	}

	canceling := p.Status == api.JobCancelRequested
	why := "the pipeline was canceled"
	if d := pj.Doc.Timeout(); d > 0 && p.StartTime != nil && !now.Before(p.StartTime.Add(d)) {
		canceling, why = true, "the pipeline reached its limits.timeout ("+p.Limits.Timeout+")"
	}
	d := pipeline.Next(order, states, p.Settings != nil && p.Settings.ContinueOnStepFailure, canceling)
	for _, name := range d.Cancel {
		child := children[name]
		reason := why
		if !canceling {
			reason = "a step of the pipeline failed: " + d.Reason
			for _, s := range order {
				if x := states[s.Name]; x.Created && (x.Status == api.JobFailed || x.Status == api.JobCanceled) {
					reason = "step " + s.Name + " of the pipeline did not complete"
					break
				}
			}
		}
		res.changed = true
		res.wake = append(res.wake, child.Nodes...)
		if err := lifecycle.CancelBecause(ctx, q, child, reason, now); err != nil {
			return res, err
		}
		st.Steps[name].Status, st.Steps[name].Reason = child.Doc.Properties.Status, child.Doc.Properties.StatusMessage
		states[name] = pipeline.State{Created: true, Status: child.Doc.Properties.Status}
	}
	if len(d.Cancel) > 0 { // steps that held no nodes ended at once: the pipeline may be over now
		d = pipeline.Next(order, states, p.Settings != nil && p.Settings.ContinueOnStepFailure, canceling)
	}
	for name, reason := range d.NotRun {
		ss := st.Steps[name]
		ss.Status, ss.Reason = api.JobNotStarted, reason
	}
	var wsDoc api.Workspace
	if len(d.Start) > 0 {
		w, err := store.Get[api.Workspace](ctx, q, store.KindWorkspace, ws.GroupID(), ws.Workspace)
		if err != nil {
			return res, fmt.Errorf("workspace of pipeline %s: %w", pj.Doc.Name, err)
		}
		wsDoc = w.Value
	}
	for _, name := range d.Start {
		if !outputsRecorded(pj.Doc, name) {
			// A step it reads from completed after this pass looked for
			// the outputs: it starts on the next pass, which finds them.
			res.again = true
			continue
		}
		childName := api.StepJobName(pj.Doc.Name, name)
		doc, err := pj.Doc.StepJob(name, childName, func(step, output string) (api.JobInput, error) {
			uri := st.Steps[step].Outputs[output]
			if uri == "" {
				return api.JobInput{}, fmt.Errorf("output %s of step %s is not there", output, step)
			}
			return api.JobInput{JobInputType: "uri_folder", URI: uri}, nil
		})
		if err == nil {
			// Where its code, data and outputs are, as for a job submitted
			// (its outputs at their default datastore paths).
			err = jobdata.Resolve(ctx, jobdata.Store{Q: q, Scope: ws, Workspace: wsDoc}, ws, childName, &doc.Properties)
			var bad *api.Error
			if errors.As(err, &bad) {
				err = errors.New(bad.Message)
			}
			if err != nil {
				err = fmt.Errorf("step %s: %w", name, err)
			}
		}
		if err != nil { // StepJob's errors name the step
			return res, lifecycle.ParentEnded(ctx, q, &pj, api.JobFailed, err.Error(), now)
		}
		doc.SystemData = pj.Doc.SystemData
		_, _, err = lifecycle.Submit(ctx, q, lifecycle.Submission{Workspace: ws, Name: childName, Job: doc, Parent: &pj}, now)
		if errors.Is(err, store.ErrExists) {
			return res, lifecycle.ParentEnded(ctx, q, &pj, api.JobFailed, "a job named "+childName+" already exists, so the pipeline cannot create its step "+name, now)
		}
		var refused *api.Error
		if errors.As(err, &refused) { // its compute is gone or can no longer hold the step
			return res, lifecycle.ParentEnded(ctx, q, &pj, api.JobFailed, "step "+name+": "+refused.Message, now)
		}
		if err != nil {
			return res, err
		}
		ss := st.Steps[name]
		ss.Job, ss.Status, ss.Reason = childName, api.JobQueued, ""
		res.changed = true
	}
	if d.End != "" {
		reason := d.Reason
		if canceling {
			reason = why
		}
		return res, lifecycle.ParentEnded(ctx, q, &pj, d.End, reason, now)
	}
	if len(d.Start) > 0 {
		return res, lifecycle.ParentRunning(ctx, q, &pj, now)
	}
	return res, store.UpdateJob(ctx, q, &pj)
}

// outputsRecorded tells whether the pipeline has recorded where every
// output that step reads is.
func outputsRecorded(pipeline api.Job, step string) bool {
	for _, in := range pipeline.Properties.Jobs[step].Inputs {
		if from, out, ok := stepRef(in); ok {
			if ss := pipeline.Properties.Pipeline.Steps[from]; ss == nil || ss.Outputs[out] == "" {
				return false
			}
		}
	}
	return true
}
