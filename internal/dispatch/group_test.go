package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
)

func TestConcurrentReportsAreAllWritten(t *testing.T) {
	f := newFixture(t)
	const n = 40
	for i := range n {
		id, uid := fmt.Sprintf("n%02d", i), fmt.Sprintf("j%02d", i)
		f.node(id, api.NodeRunning, uid)
		f.job(uid, api.JobPreparing, id)
	}
	s, _ := f.service()
	var changes atomic.Int32
	s.Changed = func() { changes.Add(1) }
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Report(f.ctx, fmt.Sprintf("n%02d", i), agentapi.JobState{UID: fmt.Sprintf("j%02d", i), Attempt: 1,
				Phase: agentapi.PhaseExited, Started: t0, Ended: t0})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("report %d: %v", i, errs[i])
		}
		if st := f.getJob(fmt.Sprintf("j%02d", i)).Doc.Properties.Status; st != api.JobCompleted {
			t.Errorf("job %d %s, want Completed", i, st)
		}
		if nd := f.getNode(fmt.Sprintf("n%02d", i)); nd.State != api.NodeIdle || nd.JobID != "" {
			t.Errorf("node %d %s with %q, want idle", i, nd.State, nd.JobID)
		}
	}
	if got := changes.Load(); got != n {
		t.Errorf("told of %d changes, want %d", got, n)
	}
}

func TestAFailingReportFailsOnlyItself(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "j1")
	f.job("j1", api.JobRunning, "n1")
	f.node("n2", api.NodeRunning, "j2")
	f.job("j2", api.JobRunning, "n2")
	if _, err := f.db.W().ExecContext(f.ctx, `UPDATE jobs SET body = 'not json' WHERE uid = 'j2'`); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	s, _ := f.service()
	good := &report{node: "n1", states: []agentapi.JobState{exited("j1", 1)}}
	bad := &report{node: "n2", states: []agentapi.JobState{exited("j2", 1)}}
	s.writeBatch(f.ctx, []*report{bad, good})
	if good.err != nil || bad.err == nil {
		t.Fatalf("errors %v and %v, want none for the good report and one for the bad", good.err, bad.err)
	}
	if st := f.getJob("j1").Doc.Properties.Status; st != api.JobCompleted {
		t.Errorf("job j1 %s, want Completed", st)
	}
}

func TestAPanicWhileWritingHandsOn(t *testing.T) {
	s := &Service{Clock: clock.NewFake(t0), Hub: hub.New()} // no store: writing panics
	report := func() (p any) {
		defer func() { p = recover() }()
		_ = s.Report(t.Context(), "n1", exited("j1", 1))
		return nil
	}
	for i := range 2 { // the second waits for ever if the first left the writing held
		done := make(chan any, 1)
		go func() { done <- report() }()
		select {
		case p := <-done:
			if p == nil {
				t.Fatalf("report %d: no panic", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("report %d waits for a batch that panicked", i)
		}
	}
}

// The exit of a part of a parallel step that keeps rows is told
// (RowsExited) once written, whether it came in an event or a poll; other
// jobs' exits and a parallel step's start are not.
func TestRowsExitedToldOfParallelExits(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "j1")
	f.job("j1", api.JobRunning, "n1")
	f.node("n2", api.NodeRunning, "p")
	f.parallelJob("p", "n2")
	f.node("n3", api.NodeRunning, "q")
	f.parallelJob("q", "n3")
	s, _ := f.service()
	var told []string
	s.RowsExited = func(_ context.Context, uid string) { told = append(told, uid) }
	if err := s.Report(f.ctx, "n1", exited("j1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Report(f.ctx, "n2", agentapi.JobState{UID: "p", Attempt: 1, Phase: agentapi.PhaseRunning, Started: t0}); err != nil {
		t.Fatal(err)
	}
	if len(told) != 0 {
		t.Errorf("told of %v, want nothing for a command job's exit and a parallel step's start", told)
	}
	if err := s.Report(f.ctx, "n2", exited("p", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PollNode(f.ctx, f.getNode("n3"), []agentapi.JobState{exited("q", 1)}, 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(told, []string{"p", "q"}) {
		t.Errorf("told of %v, want the exits of p (an event) and q (a poll)", told)
	}
}
