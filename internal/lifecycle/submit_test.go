package lifecycle_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var ws = api.Scope{Subscription: "s", ResourceGroup: "r", Workspace: "w"}

// withCompute stores compute "cpu" of ws with maxNodeCount max.
func (w *world) withCompute(max int32, state string) {
	w.t.Helper()
	c := api.Compute{Name: "cpu", Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: &max}}}}
	if err := api.PrepareCompute(&c, "cpu", nil, "local"); err != nil {
		w.t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = ws.ComputeID("cpu"), state
	if _, err := store.Put(w.ctx, w.db.W(), store.KindCompute, ws.WorkspaceID(), "cpu", c, 0, t0); err != nil {
		w.t.Fatal(err)
	}
}

func commandJob(name, command string, instances int32) api.Job {
	j := api.Job{Properties: api.JobProperties{Command: command, ComputeID: "azureml:cpu", Resources: &api.JobResources{InstanceCount: instances}}}
	if err := api.PrepareJob(&j, name); err != nil {
		panic(err)
	}
	return j
}

func sweepJob(name string, choices []any) api.Job {
	j := api.Job{Properties: api.JobProperties{JobType: api.JobTypeSweep, ComputeID: "azureml:cpu",
		Trial:             &api.TrialComponent{Command: "python train.py --lr ${{search_space.lr}}", Resources: &api.JobResources{InstanceCount: 2}},
		SearchSpace:       map[string]any{"lr": []any{"choice", []any{choices}}},
		SamplingAlgorithm: &api.SamplingAlgorithm{SamplingAlgorithmType: "Grid"},
		Objective:         &api.Objective{Goal: "Maximize", PrimaryMetric: "acc"},
		Limits:            &api.JobLimits{MaxTotalTrials: 4, MaxConcurrentTrials: 2},
	}}
	if err := api.PrepareJob(&j, name); err != nil {
		panic(err)
	}
	return j
}

func (w *world) submit(s lifecycle.Submission) (store.Job, bool, error) {
	var j store.Job
	var created bool
	err := w.do(func(q store.Querier) error {
		var err error
		j, created, err = lifecycle.Submit(w.ctx, q, s, at(1))
		return err
	})
	return j, created, err
}

// A new job is queued with its history, id, compute, owner and a sequence
// after the jobs before it; a read-only field the caller sent is dropped.
func TestSubmitCreatesAQueuedJob(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	first, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: commandJob("a", "true", 1), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	doc := commandJob("b", "echo hi", 2)
	doc.Properties.Status, doc.Properties.StatusMessage = api.JobCompleted, "forged"
	j, created, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "b", Job: doc, Principal: "alice"})
	if err != nil || !created {
		t.Fatalf("submit: created %v, %v", created, err)
	}
	p := j.Doc.Properties
	if p.Status != api.JobQueued || p.StatusMessage != "" || len(p.History) != 2 || p.History[0].Status != api.JobNotStarted {
		t.Errorf("status %s %q, history %+v; want Queued after NotStarted, no message", p.Status, p.StatusMessage, p.History)
	}
	if j.Doc.ID != ws.JobID("b") || j.Compute != ws.ComputeID("cpu") || p.ComputeID != ws.ComputeID("cpu") || j.Seq <= first.Seq {
		t.Errorf("id %s compute %s/%s seq %d after %d", j.Doc.ID, j.Compute, p.ComputeID, j.Seq, first.Seq)
	}
	if sd := j.Doc.SystemData; sd == nil || sd.CreatedBy != "alice" {
		t.Errorf("systemData %+v, want created by alice", sd)
	}
	stored := w.job(j.UID)
	if stored.Doc.Properties.Status != api.JobQueued {
		t.Errorf("stored job is %s", stored.Doc.Properties.Status)
	}
}

// Re-submitting a job under its name changes its metadata and nothing else;
// a change of what it runs is refused, naming the field, for every kind of
// job (a sweep's search space too), and changes nothing.
func TestSubmitAgainChangesOnlyMetadata(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: commandJob("a", "true", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweepJob("s", []any{0.1, 0.01})}); err != nil {
		t.Fatal(err)
	}

	again := commandJob("a", "true", 1)
	again.Properties.Description, again.Properties.Tags = "the good one", map[string]string{"stage": "prod"}
	j, created, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: again})
	if err != nil || created || j.Doc.Properties.Description != "the good one" || j.Doc.Properties.Tags["stage"] != "prod" {
		t.Fatalf("metadata update: created %v, %v, %+v", created, err, j.Doc.Properties)
	}

	for _, c := range []struct {
		name, field string
		job         api.Job
	}{
		{"a", "command", commandJob("a", "false", 1)},
		{"a", "resources.instanceCount", commandJob("a", "true", 2)},
		{"s", "searchSpace", sweepJob("s", []any{0.5})},
		{"a", "jobType", sweepJob("a", []any{0.1})},
	} {
		_, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: c.name, Job: c.job})
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != api.CodeImmutable || !strings.Contains(e.Message, c.field) {
			t.Errorf("changing %s of %s: %v, want 409 %s naming it", c.field, c.name, err, api.CodeImmutable)
		}
	}
	sw, err := store.GetJob(w.ctx, w.db.Q(), ws.WorkspaceID(), "s")
	if err != nil || !strings.Contains(sw.Doc.Properties.Trial.Command, "lr") || len(sw.Doc.Properties.SearchSpace["lr"].([]any)[1].([]any)[0].([]any)) != 2 {
		t.Errorf("the refused sweep changed: %+v %v", sw.Doc.Properties.SearchSpace, err)
	}
}

// A sweep holds no nodes: it is stored without a compute (the scheduler
// never sees it), after its trial's size was checked against the compute.
func TestSubmitSweepHoldsNoNodes(t *testing.T) {
	w := newWorld(t)
	w.withCompute(1, api.StateSucceeded)
	_, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweepJob("s", []any{0.1})})
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "trial.resources.instanceCount 2") {
		t.Fatalf("a sweep whose trials need 2 nodes on a max-1 compute: %v", err)
	}
	w.withComputeMax(2)
	j, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweepJob("s", []any{0.1})})
	if err != nil || j.Compute != "" {
		t.Fatalf("sweep stored with compute %q, %v", j.Compute, err)
	}
}

// The compute must exist in the job's workspace and not be going away.
func TestSubmitChecksTheCompute(t *testing.T) {
	w := newWorld(t)
	missing := commandJob("a", "true", 1)
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: missing}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("no compute: %v", err)
	}
	w.withCompute(2, api.StateDeleting)
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: commandJob("a", "true", 1)}); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("compute being deleted: %v", err)
	}
	other := commandJob("a", "true", 1)
	other.Properties.ComputeID = api.Scope{Subscription: "s", ResourceGroup: "r", Workspace: "other"}.ComputeID("cpu")
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: other}); err == nil || !strings.Contains(err.Error(), "workspace w") {
		t.Errorf("another workspace's compute: %v", err)
	}
	if n := w.count(); n != 0 {
		t.Errorf("%d jobs stored after refusals", n)
	}
}

// A child (a sweep's trial) whose name is taken is an error for its parent,
// not an update of the other job.
func TestSubmitChildNameTaken(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	parent, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweepJob("s", []any{0.1})})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s_0", Job: commandJob("s_0", "true", 1)}); err != nil {
		t.Fatal(err)
	}
	trial := parent.Doc.Trial("s_0", map[string]any{"lr": 0.1})
	if _, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s_0", Job: trial, Parent: &parent}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("trial over an existing job: %v, want ErrExists", err)
	}
	trial = parent.Doc.Trial("s_1", map[string]any{"lr": 0.1})
	j, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s_1", Job: trial, Parent: &parent})
	if err != nil || j.Doc.Properties.ParentJobName != "s" || j.Compute == "" || j.Doc.SystemData != nil && parent.Doc.SystemData != nil && j.Doc.SystemData.CreatedAt != parent.Doc.SystemData.CreatedAt {
		t.Fatalf("trial: %+v %v", j.Doc.Properties, err)
	}
}

func (w *world) withComputeMax(max int32) {
	w.t.Helper()
	err := w.do(func(q store.Querier) error {
		d, err := store.Get[api.Compute](w.ctx, q, store.KindCompute, ws.WorkspaceID(), "cpu")
		if err != nil {
			return err
		}
		d.Value.Aml().ScaleSettings.MaxNodeCount = &max
		_, err = store.Put(w.ctx, q, store.KindCompute, ws.WorkspaceID(), "cpu", d.Value, d.Version, t0)
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) count() int {
	w.t.Helper()
	var n int
	if err := w.db.Q().QueryRowContext(w.ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}
