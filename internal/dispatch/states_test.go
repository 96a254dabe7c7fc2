package dispatch

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (f *fixture) apply(node string, st agentapi.JobState, now time.Time) Outcome {
	f.t.Helper()
	var out Outcome
	f.tx(func(q store.Querier) error {
		var err error
		out, err = ApplyJobState(f.ctx, q, node, st, DefaultRetries(), now)
		return err
	})
	return out
}

func TestApplyJobState(t *testing.T) {
	later := t0.Add(time.Minute)
	t.Run("running starts the job at the time the agent reports", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.node("n2", api.NodeRunning, "j1")
		f.job("j1", api.JobPreparing, "n1", "n2")
		out := f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseRunning, Started: t0}, later)
		if !out.Changed || !slices.Equal(out.Wake, []string{"n1", "n2"}) {
			t.Errorf("outcome %+v, want changed, waking both nodes", out)
		}
		j := f.getJob("j1")
		if st := j.Doc.Properties.Status; st != api.JobRunning || !j.Doc.Properties.StartTime.Equal(t0) {
			t.Errorf("job %s from %v, want Running from %v", st, j.Doc.Properties.StartTime, t0)
		}
		if out := f.apply("n2", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseRunning, Started: later}, later); out.Changed {
			t.Error("a second node starting a running job changed it")
		}
	})
	t.Run("a node still preparing the job leaves it Preparing", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobPreparing, "n1")
		if out := f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseRunning}, later); out.Changed {
			t.Error("a node that has not started the job's processes changed the job")
		}
		if j := f.getJob("j1"); j.Doc.Properties.Status != api.JobPreparing || j.Doc.Properties.StartTime != nil {
			t.Errorf("job %s from %v, want Preparing, not started", j.Doc.Properties.Status, j.Doc.Properties.StartTime)
		}
	})
	t.Run("exit of every node completes the job and frees the nodes", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n1")
		if out := f.apply("n1", exited("j1", 1), later); !out.Changed {
			t.Error("not changed")
		}
		if st := f.getJob("j1").Doc.Properties.Status; st != api.JobCompleted {
			t.Errorf("job %s, want Completed", st)
		}
		if n := f.getNode("n1"); n.State != api.NodeIdle || n.JobID != "" || !n.IdleSince.Equal(later) {
			t.Errorf("node %s with %q idle since %v, want idle since %v", n.State, n.JobID, n.IdleSince, later)
		}
	})
	t.Run("only an exit of a parallel step that keeps rows asks for them to be filed", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n1")
		if out := f.apply("n1", exited("j1", 1), later); out.Rows {
			t.Error("the exit of a command job asks for rows to be filed")
		}
		f.node("n2", api.NodeRunning, "p")
		f.parallelJob("p", "n2")
		if out := f.apply("n2", agentapi.JobState{UID: "p", Attempt: 1, Phase: agentapi.PhaseRunning, Started: t0}, later); out.Rows {
			t.Error("a parallel step's start asks for rows to be filed")
		}
		if out := f.apply("n2", exited("p", 1), later); !out.Rows {
			t.Error("the exit of a parallel step with append_row_to does not ask for its rows to be filed")
		}
		f.node("n3", api.NodeRunning, "q")
		j := f.parallelJob("q", "n3")
		j.Doc.Properties.ParallelSpec.Task.AppendRowTo = ""
		if err := store.UpdateJob(f.ctx, f.db.W(), &j); err != nil {
			t.Fatal(err)
		}
		if out := f.apply("n3", exited("q", 1), later); out.Rows {
			t.Error("the exit of a parallel step that keeps no rows asks for rows to be filed")
		}
	})
	t.Run("an exit that carries its start runs the job before it ends", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobPreparing, "n1")
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, Started: t0, Ended: later}, later)
		j := f.getJob("j1")
		var seen []string
		for _, h := range j.Doc.Properties.History {
			seen = append(seen, h.Status)
		}
		if p := j.Doc.Properties; p.Status != api.JobCompleted || p.StartTime == nil || !p.StartTime.Equal(t0) ||
			!slices.Contains(seen, api.JobRunning) {
			t.Errorf("job %s from %v through %v, want Completed, started at %v, Running on the way", p.Status, p.StartTime, seen, t0)
		}
		if n := f.getNode("n1"); n.State != api.NodeIdle || n.JobID != "" {
			t.Errorf("node %s with %q, want idle", n.State, n.JobID)
		}
	})
	t.Run("exit on an evicted node is a preemption", func(t *testing.T) {
		f := newFixture(t)
		n := f.node("n1", api.NodeRunning, "j1")
		n.Evicted = t0
		if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
			t.Fatal(err)
		}
		f.job("j1", api.JobRunning, "n1")
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: 143}, later)
		j := f.getJob("j1")
		if j.Doc.Properties.Status != api.JobQueued || j.Preemptions != 1 {
			t.Errorf("job %s after %d preemptions, want Queued after 1", j.Doc.Properties.Status, j.Preemptions)
		}
		if n := f.getNode("n1"); n.State != api.NodePreempted {
			t.Errorf("node %s, want Preempted", n.State)
		}
	})
	t.Run("exit because the node stopped requeues the job", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n1")
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: 143, NodeStopped: true}, later)
		if st := f.getJob("j1").Doc.Properties.Status; st != api.JobQueued {
			t.Errorf("job %s, want Queued", st)
		}
		if n := f.getNode("n1"); n.State != api.NodeUnusable {
			t.Errorf("node %s, want Unusable", n.State)
		}
	})
	t.Run("a failing exit fails the job", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n1")
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: 2, Reason: "boom"}, later)
		if p := f.getJob("j1").Doc.Properties; p.Status != api.JobFailed {
			t.Errorf("job %s (%s), want Failed", p.Status, p.StatusMessage)
		}
	})
	t.Run("an MPI launcher that reports exit 0 while mpirun runs ends the attempt at once", func(t *testing.T) {
		// What the rank 1 reported: its launcher ended 0.3 s after
		// it started, with nothing in its log, while mpirun waited.
		f := newFixture(t)
		f.node("n0", api.NodeRunning, "j1")
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n0", "n1")
		out := f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: 0, MPIRole: agentapi.MPIRoleLauncher,
			Started: t0, Ended: t0.Add(300 * time.Millisecond)}, later)
		if !slices.Equal(out.Wake, []string{"n0", "n1"}) {
			t.Errorf("woken %v; want both nodes (mpirun's is told to stop)", out.Wake)
		}
		j := f.getJob("j1")
		want := "node rank 1 (node n1): its MPI launcher ended (exit code 0) while node rank 0's mpirun still ran; mpirun cannot finish without that node"
		if p := j.Doc.Properties; p.Status != api.JobQueued || p.Attempts[0].Reason != want {
			t.Errorf("job %s, attempt %+v; want queued again, the attempt ended with %q", p.Status, p.Attempts[0], want)
		}
		if n := f.getNode("n1"); n.State != api.NodeIdle || n.JobID != "" {
			t.Errorf("the launcher's node is %s with %q; want idle", n.State, n.JobID)
		}
	})
	t.Run("mpirun's end stops the launchers, and their stop completes the job", func(t *testing.T) {
		f := newFixture(t)
		f.node("n0", api.NodeRunning, "j1")
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n0", "n1")
		f.apply("n0", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, MPIRole: agentapi.MPIRoleMpirun}, later)
		j := f.getJob("j1")
		if j.Doc.Properties.Status != api.JobRunning || !j.MPIDone {
			t.Fatalf("job %s, mpirun done %v; want Running until its launchers stop", j.Doc.Properties.Status, j.MPIDone)
		}
		v := View{Known: true, Node: f.getNode("n1"), Jobs: map[string]store.Job{"j1": j}}
		if p := Instructions(v, []agentapi.JobState{running("j1", 1)}); !slices.Equal(p.Response.Cancel, []string{"j1"}) || p.Response.StopReasons["j1"] != LaunchOver {
			t.Fatalf("the launcher's node is told %+v; want to stop it: %s", p.Response, LaunchOver)
		}
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: 143, MPIRole: agentapi.MPIRoleLauncher, Reason: LaunchOver}, later)
		if st := f.getJob("j1").Doc.Properties.Status; st != api.JobCompleted {
			t.Errorf("job %s; want Completed (mpirun ended with 0)", st)
		}
	})
	t.Run("a part whose port is in use restarts the job on other ports", func(t *testing.T) {
		f := newFixture(t)
		f.node("n0", api.NodeRunning, "j1")
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n0", "n1")
		f.apply("n1", agentapi.JobState{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited, ExitCode: -1, PortBusy: 21234}, later)
		j := f.getJob("j1")
		if p := j.Doc.Properties; p.Status != api.JobQueued || j.PortRetries != 1 ||
			p.Attempts[0].Reason != "port 21234 was in use on node n1 (node rank 1 of 2); started again on other ports" {
			t.Errorf("job %s after %d port restarts, attempt %+v; want queued again", p.Status, j.PortRetries, p.Attempts[0])
		}
	})
	t.Run("a job the store does not have is ignored", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeIdle, "")
		if out := f.apply("n1", exited("gone", 1), later); out.Changed || len(out.Wake) > 0 {
			t.Errorf("outcome %+v, want none", out)
		}
	})
}

func TestReleaseStale(t *testing.T) {
	later := t0.Add(time.Minute)
	release := func(f *fixture, node, uid string) bool {
		t.Helper()
		var released bool
		f.tx(func(q store.Querier) error {
			var err error
			released, err = ReleaseStale(f.ctx, q, node, uid, DefaultRetries(), later)
			return err
		})
		return released
	}
	t.Run("a part the node never started ends the attempt", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobPreparing, "n1")
		if !release(f, "n1", "j1") {
			t.Error("not released")
		}
		j := f.getJob("j1")
		if j.Exits["n1"] != exitNeverStarted {
			t.Errorf("exits %v, want n1: %d", j.Exits, exitNeverStarted)
		}
		if n := f.getNode("n1"); n.JobID != "" || n.State != api.NodeIdle {
			t.Errorf("node %s with %q, want idle without a job", n.State, n.JobID)
		}
	})
	t.Run("a job that left the node frees it", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.job("j1", api.JobQueued)
		if !release(f, "n1", "j1") {
			t.Error("not released")
		}
		if n := f.getNode("n1"); n.JobID != "" || n.State != api.NodeIdle || !n.IdleSince.Equal(later) {
			t.Errorf("node %s with %q idle since %v, want idle since %v", n.State, n.JobID, n.IdleSince, later)
		}
	})
	t.Run("an evicted node's part counts as preempted", func(t *testing.T) {
		f := newFixture(t)
		n := f.node("n1", api.NodeRunning, "j1")
		n.Evicted = t0
		if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
			t.Fatal(err)
		}
		f.job("j1", api.JobPreparing, "n1")
		release(f, "n1", "j1")
		if j := f.getJob("j1"); j.Doc.Properties.Status != api.JobQueued || j.Preemptions != 1 {
			t.Errorf("job %s after %d preemptions, want Queued after 1", j.Doc.Properties.Status, j.Preemptions)
		}
	})
	t.Run("a node that moved on is left alone", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j2")
		if release(f, "n1", "j1") {
			t.Error("released a node from a job it no longer holds")
		}
		if n := f.getNode("n1"); n.JobID != "j2" {
			t.Errorf("node holds %q, want j2", n.JobID)
		}
	})
}

func TestLeave(t *testing.T) {
	leave := func(f *fixture, node string) ([]string, error) {
		var wake []string
		err := f.db.Tx(f.ctx, func(q store.Querier) error {
			var err error
			wake, err = Leave(f.ctx, q, node, DefaultRetries(), t0)
			return err
		})
		return wake, err
	}
	t.Run("a dedicated node's job is requeued at once", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeRunning, "j1")
		f.node("n2", api.NodeRunning, "j1")
		f.job("j1", api.JobRunning, "n1", "n2")
		wake, err := leave(f, "n1")
		if err != nil || !slices.Equal(wake, []string{"n1", "n2"}) {
			t.Errorf("wake %v, %v; want both nodes", wake, err)
		}
		if st := f.getJob("j1").Doc.Properties.Status; st != api.JobQueued {
			t.Errorf("job %s, want Queued", st)
		}
		if n := f.getNode("n1"); n.State != api.NodeUnusable {
			t.Errorf("node %s, want Unusable", n.State)
		}
	})
	t.Run("a low-priority node is evicted", func(t *testing.T) {
		f := newFixture(t)
		n := f.node("n1", api.NodeRunning, "j1")
		n.Priority = api.PriorityLowPriority
		if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
			t.Fatal(err)
		}
		f.job("j1", api.JobRunning, "n1")
		if wake, err := leave(f, "n1"); err != nil || !slices.Equal(wake, []string{"n1"}) {
			t.Errorf("wake %v, %v; want n1", wake, err)
		}
		if n := f.getNode("n1"); n.Evicted.IsZero() {
			t.Error("the node was not evicted")
		}
		if st := f.getJob("j1").Doc.Properties.Status; st != api.JobRunning {
			t.Errorf("job %s, want Running until the agent reports it stopped", st)
		}
	})
	t.Run("a low-priority node that cannot be evicted says so", func(t *testing.T) {
		f := newFixture(t)
		n := f.node("n1", api.NodeUnusable, "j1")
		n.Priority = api.PriorityLowPriority
		if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
			t.Fatal(err)
		}
		if _, err := leave(f, "n1"); !errors.Is(err, lifecycle.ErrNotEvictable) {
			t.Errorf("err %v, want ErrNotEvictable", err)
		}
	})
	t.Run("a node Cumulus removes is not news", func(t *testing.T) {
		f := newFixture(t)
		f.node("n1", api.NodeLeaving, "j1")
		f.job("j1", api.JobRunning, "n1")
		if _, err := leave(f, "n1"); err != nil {
			t.Fatal(err)
		}
		if n := f.getNode("n1"); n.State != api.NodeLeaving {
			t.Errorf("node %s, want still Leaving", n.State)
		}
	})
}
