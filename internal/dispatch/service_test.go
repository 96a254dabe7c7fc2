package dispatch

import (
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/store"
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

// A poll that reports nothing decides first from the node as its caller
// read it; when the node was given a job after that read (the controller
// wakes the node's poll), the poll reads it again and hands the job over
// rather than holding on a stale look.
func TestPollNodeLooksAgainAfterAChangeItDidNotRead(t *testing.T) {
	f := newFixture(t)
	idle := f.node("n1", api.NodeIdle, "")
	f.node("n1", api.NodeRunning, "j1") // assigned after the caller's read
	f.job("j1", api.JobPreparing, "n1")
	s, _ := f.service()
	s.Hub.Wake("n1") // as the controller does after it assigns
	resp, err := s.PollNode(f.ctx, idle, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Assign == nil || resp.Assign.UID != "j1" {
		t.Fatalf("response %+v, want j1 assigned", resp)
	}
}

// From the node as read, an answer is given without reading it again:
// a node marked leaving (in the read) is told to shut down at once.
func TestPollNodeAnswersFromTheNodeAsRead(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeIdle, "")
	leaving := store.Node{ID: "n1", State: api.NodeLeaving}
	s, _ := f.service()
	resp, err := s.PollNode(f.ctx, leaving, nil, 0) // not held: the answer is the first look's
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Shutdown {
		t.Fatalf("response %+v, want shutdown", resp)
	}
}
