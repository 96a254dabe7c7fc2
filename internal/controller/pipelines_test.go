package controller

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

type pipelineHarness struct {
	*sweepHarness
	p    *Pipelines
	data string
}

func newPipelineHarness(t *testing.T) *pipelineHarness {
	h := &pipelineHarness{sweepHarness: newSweepHarness(t), data: t.TempDir()}
	h.p = h.controller()
	sc, _, _ := api.ParseJobID(sweepWS + "/jobs/x")
	w := api.Workspace{ID: sc.WorkspaceID(), Name: sc.Workspace}
	if _, err := store.Put(h.ctx, h.db.W(), store.KindWorkspace, sc.GroupID(), sc.Workspace, w, 0, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	return h
}

// controller is a Pipelines controller on the harness's store and files,
// as a control plane that starts (again) makes it.
func (h *pipelineHarness) controller() *Pipelines {
	return &Pipelines{DB: h.db, Clock: h.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Outputs: files.Outputs{Dir: filepath.Join(h.data, "outputs")}, Blobs: files.Blobs{Dir: filepath.Join(h.data, "blobs")}}
}

// submitPipeline stores a pipeline of three steps — prep, then score and
// side (side reads nothing), then report after score — as the server does.
func (h *pipelineHarness) submitPipeline(name string, continueOnFailure bool) {
	h.t.Helper()
	h.submit("compute-maker", nil) // makes the compute (and a sweep nobody drives here)
	bind := func(s string) api.JobInput { return api.JobInput{JobInputType: "uri_folder", URI: s} }
	out := map[string]api.JobOutput{"out": {JobOutputType: "uri_folder"}}
	j := api.Job{Name: name, Properties: api.JobProperties{JobType: api.JobTypePipeline,
		Settings: &api.PipelineSettings{DefaultCompute: sweepWS + "/computes/cpu", ContinueOnStepFailure: continueOnFailure},
		Jobs: map[string]*api.PipelineStep{
			"prep":   {Type: "command", JobProperties: api.JobProperties{Command: "prep", Outputs: out}},
			"side":   {Type: "command", JobProperties: api.JobProperties{Command: "side"}},
			"score":  {Type: "command", JobProperties: api.JobProperties{Command: "score ${{inputs.data}}", Inputs: map[string]api.JobInput{"data": bind("${{parent.jobs.prep.outputs.out}}")}, Outputs: out}},
			"report": {Type: "command", JobProperties: api.JobProperties{Command: "report", Inputs: map[string]api.JobInput{"scores": bind("${{parent.jobs.score.outputs.out}}")}}},
		}}}
	if err := api.PrepareJob(&j, name); err != nil {
		h.t.Fatal(err)
	}
	sc, _, _ := api.ParseJobID(sweepWS + "/jobs/" + name)
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		_, _, err := lifecycle.Submit(h.ctx, q, lifecycle.Submission{Workspace: sc, Name: name, Job: j, Principal: "alice"}, h.clk.Now())
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *pipelineHarness) pass() {
	h.t.Helper()
	if err := h.p.RunOnce(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pipelineHarness) get(name string) store.Job {
	h.t.Helper()
	j, err := store.GetJob(h.ctx, h.db.Q(), sweepWS, name)
	if err != nil {
		h.t.Fatalf("job %s: %v", name, err)
	}
	return j
}

func (h *pipelineHarness) exists(name string) bool {
	_, err := store.GetJob(h.ctx, h.db.Q(), sweepWS, name)
	return err == nil
}

// end ends a step's job as its nodes would, with an output file.
func (h *pipelineHarness) end(name, status string, output string) {
	h.t.Helper()
	j := h.get(name)
	if output != "" {
		dir := h.t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte(output), 0o644); err != nil {
			h.t.Fatal(err)
		}
		var b bytes.Buffer
		if err := files.Pack(&b, dir); err != nil {
			h.t.Fatal(err)
		}
		if err := h.p.Outputs.Put(j.UID, "out", 1, 0, &b, 1<<20); err != nil {
			h.t.Fatal(err)
		}
	}
	j.Doc.SetStatus(status, h.clk.Now(), "")
	if err := store.UpdateJob(h.ctx, h.db.W(), &j); err != nil {
		h.t.Fatal(err)
	}
}

// Steps start when the steps they read from completed, with those
// outputs as blobs of the workspace; the pipeline ends when they all did.
// A controller that starts again never makes a step twice.
func TestPipelineRunsStepsInOrder(t *testing.T) {
	h := newPipelineHarness(t)
	h.submitPipeline("p", false)
	h.pass()
	if !h.exists("p_prep") || !h.exists("p_side") || h.exists("p_score") {
		t.Fatal("the first pass starts prep and side only")
	}
	if st := h.get("p").Doc.Properties; st.Status != api.JobRunning || st.Pipeline.Steps["prep"].Job != "p_prep" {
		t.Fatalf("pipeline %s, steps %+v", st.Status, st.Pipeline.Steps)
	}
	prep := h.get("p_prep")
	if !strings.EqualFold(prep.Compute, sweepWS+"/computes/cpu") || prep.Doc.Properties.ParentJobName != "p" || prep.Doc.Properties.DisplayName != "prep" {
		t.Fatalf("step job: compute %q parent %q", prep.Compute, prep.Doc.Properties.ParentJobName)
	}
	h.end("p_prep", api.JobCompleted, "rows\n")
	h.p = h.controller() // a restarted control plane
	h.pass()
	h.pass()
	score := h.get("p_score")
	uri := score.Doc.Properties.Inputs["data"].URI
	digest, ok := strings.CutPrefix(uri, api.BlobURIScheme)
	if !ok || !h.p.Blobs.Has(digest) {
		t.Fatalf("score's input %q is not a stored blob", uri)
	}
	f, _ := h.p.Blobs.Open(digest)
	sum := sha256.New()
	_, _ = io.Copy(sum, f)
	f.Close()
	if hex.EncodeToString(sum.Sum(nil)) != digest {
		t.Fatal("the blob is not its digest")
	}
	if _, err := store.GetBlobOwner(h.ctx, h.db.Q(), digest, sweepWS); err != nil {
		t.Fatalf("the workspace does not own the step's output: %v", err)
	}
	if score.Attempt != 0 || len(score.Doc.Properties.History) != 2 {
		t.Fatalf("score made more than once? %+v", score.Doc.Properties.History)
	}
	h.end("p_side", api.JobCompleted, "")
	h.end("p_score", api.JobCompleted, "scores\n")
	h.pass()
	h.end("p_report", api.JobCompleted, "")
	h.pass()
	if p := h.get("p").Doc.Properties; p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s: %s", p.Status, p.StatusMessage)
	}
}

// A step that completes while a pass runs — after the pass looked for the
// outputs the next steps read, before it decided what to start — holds
// those steps for a pass soon after, which starts them with its outputs;
// it does not fail the pipeline for an output "not there".
func TestPipelineStepCompletingMidPass(t *testing.T) {
	h := newPipelineHarness(t)
	h.submitPipeline("p", false)
	h.pass()
	outputs, err := h.p.stepOutputs(h.ctx, h.get("p")) // prep still runs: nothing to find
	if err != nil || len(outputs) != 0 {
		t.Fatalf("outputs of a running step: %v %v", outputs, err)
	}
	h.end("p_prep", api.JobCompleted, "rows\n")
	var res passResult
	err = h.db.Tx(h.ctx, func(q store.Querier) error {
		var err error
		res, err = h.p.drive(h.ctx, q, h.get("p").UID, outputs, h.clk.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := h.get("p").Doc.Properties; p.Status != api.JobRunning || h.exists("p_score") || !res.again {
		t.Fatalf("pipeline %s %q, score made: %v, another pass asked: %v", p.Status, p.StatusMessage, h.exists("p_score"), res.again)
	}
	h.pass()
	if uri := h.get("p_score").Doc.Properties.Inputs["data"].URI; !strings.HasPrefix(uri, api.BlobURIScheme) {
		t.Fatalf("score's input %q", uri)
	}
}

// A failed step cancels the running steps and fails the pipeline; the
// steps after it never run. With continue_on_step_failure the steps that
// do not read from it go on.
func TestPipelineStepFailure(t *testing.T) {
	h := newPipelineHarness(t)
	h.submitPipeline("p", false)
	h.pass()
	h.end("p_prep", api.JobFailed, "")
	h.pass()
	if side := h.get("p_side").Doc.Properties; side.Status != api.JobCanceled || !strings.Contains(side.StatusMessage, "step prep") {
		t.Fatalf("the running step: %s %q", side.Status, side.StatusMessage)
	}
	p := h.get("p").Doc.Properties
	if p.Status != api.JobFailed || !strings.Contains(p.StatusMessage, "prep") || h.exists("p_score") ||
		!strings.Contains(p.Pipeline.Steps["report"].Reason, "not run: step prep did not complete") {
		t.Fatalf("pipeline %s %q, steps %+v", p.Status, p.StatusMessage, p.Pipeline.Steps["report"])
	}

	h.submitPipeline("q", true)
	h.pass()
	h.end("q_prep", api.JobFailed, "")
	h.pass()
	if side := h.get("q_side").Doc.Properties; side.Status != api.JobQueued {
		t.Fatalf("continue_on_step_failure: the independent step is %s", side.Status)
	}
	h.end("q_side", api.JobCompleted, "")
	h.pass()
	if q := h.get("q").Doc.Properties; q.Status != api.JobFailed || h.exists("q_score") {
		t.Fatalf("pipeline %s", q.Status)
	}
}

// Canceling a pipeline cancels its running steps, then it.
func TestPipelineCancel(t *testing.T) {
	h := newPipelineHarness(t)
	h.submitPipeline("p", false)
	h.pass()
	p := h.get("p")
	if err := h.db.Tx(h.ctx, func(q store.Querier) error { return lifecycle.RequestCancel(h.ctx, q, p, h.clk.Now()) }); err != nil {
		t.Fatal(err)
	}
	if st := h.get("p").Doc.Properties.Status; st != api.JobCancelRequested {
		t.Fatalf("a pipeline holds no nodes: it is %s until its steps are", st)
	}
	h.pass()
	if prep := h.get("p_prep").Doc.Properties.Status; prep != api.JobCanceled {
		t.Fatalf("prep %s", prep)
	}
	if st := h.get("p").Doc.Properties.Status; st != api.JobCanceled {
		t.Fatalf("pipeline %s", st)
	}
}

// A sweep step is a sweep job of the pipeline, which the sweep controller
// then drives: its trials are named after the step's job.
func TestPipelineSweepStep(t *testing.T) {
	h := newPipelineHarness(t)
	h.submit("compute-maker", nil)
	seed := int64(1)
	j := api.Job{Name: "p", Properties: api.JobProperties{JobType: api.JobTypePipeline,
		Settings: &api.PipelineSettings{DefaultCompute: sweepWS + "/computes/cpu"},
		Jobs: map[string]*api.PipelineStep{"tune": {Type: "sweep", JobProperties: api.JobProperties{
			Trial:             &api.TrialComponent{Command: "python train.py --x ${{search_space.x}}"},
			SearchSpace:       map[string]any{"x": []any{"choice", []any{[]any{1.0, 2.0}}}},
			SamplingAlgorithm: &api.SamplingAlgorithm{SamplingAlgorithmType: "grid", Seed: &seed},
			Objective:         &api.Objective{Goal: "maximize", PrimaryMetric: "acc"},
			Sweep:             &api.SweepStatus{Seed: 1},
		}}}}}
	if err := api.PrepareJob(&j, "p"); err != nil {
		t.Fatal(err)
	}
	sc, _, _ := api.ParseJobID(sweepWS + "/jobs/p")
	if err := h.db.Tx(h.ctx, func(q store.Querier) error {
		_, _, err := lifecycle.Submit(h.ctx, q, lifecycle.Submission{Workspace: sc, Name: "p", Job: j}, h.clk.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.pass()
	tune := h.get("p_tune")
	if !tune.Doc.IsSweep() || tune.Compute != "" || tune.Doc.Properties.ParentJobName != "p" {
		t.Fatalf("the sweep step: %s, compute %q", tune.Doc.Properties.JobType, tune.Compute)
	}
	if err := h.c.RunOnce(h.ctx); err != nil {
		t.Fatal(err)
	}
	if !h.exists("p_tune_0") || !h.exists("p_tune_1") {
		t.Fatal("the sweep step's trials were not created")
	}
}
