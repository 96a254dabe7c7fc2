package lifecycle_test

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A parent job runs once it started a child, ends once, and keeps its end:
// a late pass of its controller cannot move it again.
func TestParentTransitions(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	sw, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweepJob("s", []any{0.1})})
	if err != nil {
		t.Fatal(err)
	}
	w.must(func(q store.Querier) error { return lifecycle.ParentRunning(w.ctx, q, &sw, at(2)) })
	if p := w.job(sw.UID).Doc.Properties; p.Status != api.JobRunning || p.StartTime == nil || !p.StartTime.Equal(at(2)) {
		t.Fatalf("after its first trial: %s since %v", p.Status, p.StartTime)
	}
	if err := w.do(func(q store.Querier) error { return lifecycle.ParentEnded(w.ctx, q, &sw, api.JobRunning, "", at(3)) }); err == nil {
		t.Error("ParentEnded accepted Running as an end")
	}
	sw = w.job(sw.UID)
	w.must(func(q store.Querier) error { return lifecycle.ParentEnded(w.ctx, q, &sw, api.JobCompleted, "", at(4)) })
	w.must(func(q store.Querier) error { return lifecycle.ParentEnded(w.ctx, q, &sw, api.JobFailed, "late", at(5)) })
	w.must(func(q store.Querier) error { return lifecycle.ParentRunning(w.ctx, q, &sw, at(6)) })
	if p := w.job(sw.UID).Doc.Properties; p.Status != api.JobCompleted || !p.EndTime.Equal(at(4)) {
		t.Errorf("ended job moved on: %s at %v", p.Status, p.EndTime)
	}
}

// A job whose compute went away fails, whatever it was doing; an ended one
// keeps its end.
func TestAbandon(t *testing.T) {
	w := newWorld(t)
	j, _ := w.running("r", 1)
	w.must(func(q store.Querier) error { return lifecycle.Abandon(w.ctx, q, &j, "the compute was deleted", at(3)) })
	wantJob(t, w.job("r"), api.JobFailed, "the compute was deleted")
	j = w.job("r")
	w.must(func(q store.Querier) error { return lifecycle.Abandon(w.ctx, q, &j, "again", at(4)) })
	wantJob(t, w.job("r"), api.JobFailed, "the compute was deleted")
}
