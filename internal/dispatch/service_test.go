package dispatch

import (
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
)

// checkpoints is an Outputs that holds the checkpoints of the listed jobs.
type checkpoints []string

func (c checkpoints) Has(uid, name string) bool {
	return name == agentapi.CheckpointOutput && slices.Contains(c, uid)
}

var _ Outputs = checkpoints(nil)

func (f *fixture) service() (*Service, *int) {
	changes := 0
	s := &Service{DB: f.db, Clock: clock.NewFake(t0), Hub: hub.New(), PollTimeout: time.Minute, Retries: DefaultRetries(),
		Outputs:  checkpoints{"j1"},
		ClientID: func(c api.Compute) (string, bool) { return "client-of-" + c.Name, true },
		Changed:  func() { changes++ }}
	return s, &changes
}

func TestPollAssignsWhatTheStoreSays(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "j1")
	f.node("n2", api.NodeRunning, "j1")
	f.job("j1", api.JobPreparing, "n1", "n2")
	s, _ := f.service()

	resp, err := s.Poll(f.ctx, "n2", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := resp.Assign
	if a == nil {
		t.Fatalf("no assignment: %+v", resp)
	}
	if a.UID != "j1" || a.InstanceIndex != 1 || !slices.Equal(a.NodeIPs, []string{"10.0.0.1", "10.0.0.2"}) ||
		!a.Checkpoint || !a.Identity || a.DefaultClientID != "client-of-gpu" {
		t.Errorf("assignment %+v", a)
	}
	if seen, ok := s.Hub.LastSeen("n2"); !ok || !seen.Equal(t0) {
		t.Errorf("last seen %v, %v; want %v", seen, ok, t0)
	}
}

func TestPollRecordsReportsThenAnswers(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "j1")
	f.job("j1", api.JobRunning, "n1")
	s, changes := f.service()

	resp, err := s.Poll(f.ctx, "n1", []agentapi.JobState{{UID: "j1", Attempt: 1, Phase: agentapi.PhaseExited}, running("old", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Cancel, []string{"old"}) || resp.Assign != nil {
		t.Errorf("response %+v, want only old canceled", resp)
	}
	if st := f.getJob("j1").Doc.Properties.Status; st != api.JobCompleted {
		t.Errorf("job %s, want Completed", st)
	}
	if *changes == 0 {
		t.Error("the controllers were not told")
	}
}

func TestPollReleasesAStaleJob(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "j1")
	f.job("j1", api.JobCanceled)
	s, changes := f.service()

	resp, err := s.Instructions(f.ctx, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if news(resp) {
		t.Errorf("response %+v, want none", resp)
	}
	if n := f.getNode("n1"); n.JobID != "" || n.State != api.NodeIdle {
		t.Errorf("node %s with %q, want idle without a job", n.State, n.JobID)
	}
	if *changes != 1 {
		t.Errorf("%d changes told, want 1", *changes)
	}
}

func TestPollOfAnUnknownNode(t *testing.T) {
	f := newFixture(t)
	s, _ := f.service()
	resp, err := s.Poll(f.ctx, "gone", nil)
	if err != nil || !resp.Unknown {
		t.Errorf("Poll = %+v, %v; want Unknown", resp, err)
	}
}
