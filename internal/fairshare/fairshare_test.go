package fairshare_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/fairshare"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var (
	t0 = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	ws = api.Scope{Subscription: "s", ResourceGroup: "r", Workspace: "w"}
)

type world struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
}

func newWorld(t *testing.T, policy *api.QueuePolicy) (*world, api.Compute) {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "fs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	max := int32(4)
	c := api.Compute{Name: "cpu", Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: &max}, QueuePolicy: policy}}}
	if err := api.PrepareCompute(&c, "cpu", nil, "local"); err != nil {
		t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = ws.ComputeID("cpu"), api.StateSucceeded
	if _, err := store.Put(ctx, db.W(), store.KindCompute, ws.WorkspaceID(), "cpu", c, 0, t0); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ctx: ctx, db: db}, c
}

// submit queues a one-node job of who, with a priority.
func (w *world) submit(name, who string, priority int) store.Job {
	w.t.Helper()
	j := api.Job{Properties: api.JobProperties{Command: "true", ComputeID: "azureml:cpu", Priority: priority}}
	if err := api.PrepareJob(&j, name); err != nil {
		w.t.Fatal(err)
	}
	var out store.Job
	err := w.db.Tx(w.ctx, func(q store.Querier) error {
		var err error
		out, _, err = lifecycle.Submit(w.ctx, q, lifecycle.Submission{Workspace: ws, Name: name, Job: j, Principal: who}, t0)
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func names(s *fairshare.State) []string {
	var out []string
	for _, j := range s.Queued {
		out = append(out, j.Name)
	}
	return out
}

// A FIFO compute's queue head is in priority, then submission order, and
// reading it reads nothing of groups.
func TestReadFIFO(t *testing.T) {
	w, c := newWorld(t, nil)
	w.submit("a1", "alice", 0)
	w.submit("b1", "bob", 5)
	w.submit("a2", "alice", 0)
	s, err := fairshare.Read(w.ctx, w.db.Q(), c, nil, 10, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(s); len(got) != 3 || got[0] != "b1" || got[1] != "a1" || got[2] != "a2" {
		t.Errorf("queue head %v, want b1 a1 a2", got)
	}
	if s.Queue.FairShare || s.Running != nil || s.Usage != nil {
		t.Errorf("FIFO read fair-share state: %+v", s)
	}
}

// Under fair share the head holds each group's first jobs; a group's usage
// is advanced from the nodes it holds, written once when that changed, and
// the decision's snapshot carries the nodes as they are.
func TestReadFairShareKeepsUsage(t *testing.T) {
	w, c := newWorld(t, &api.QueuePolicy{Kind: api.QueuePolicyFairShare})
	a1 := w.submit("a1", "alice", 0)
	for _, n := range []string{"a2", "a3", "a4"} {
		w.submit(n, "alice", 0)
	}
	w.submit("b1", "bob", 0)
	// alice's first job holds two nodes (as the scheduler would have it).
	nodes := []store.Node{
		{ID: "n1", Compute: c.ID, State: api.NodeIdle, Created: t0},
		{ID: "n2", Compute: c.ID, State: api.NodeIdle, Created: t0, SSHOpen: 1},
	}
	for _, n := range nodes {
		if err := w.db.Tx(w.ctx, func(q store.Querier) error { return store.PutNode(w.ctx, q, n) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.db.Tx(w.ctx, func(q store.Querier) error {
		_, err := lifecycle.Assign(w.ctx, q, a1.UID, []string{"n1"}, t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	nodes[0].State, nodes[0].JobID = api.NodeRunning, a1.UID

	s, err := fairshare.Read(w.ctx, w.db.Q(), c, nodes, 2, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := names(s)
	if len(got) != 3 || !contains(got, "b1") {
		t.Errorf("queue head %v, want two of alice's and bob's one", got)
	}
	if len(s.Running) != 1 || s.Running[0].Group != "alice" {
		t.Errorf("running %+v, want alice's job", s.Running)
	}
	if u := s.Usage["alice"]; u.Held != 1 {
		t.Errorf("alice's usage %+v, want 1 node held", u)
	}
	cl := s.Cluster(c, nodes, false, t0)
	if len(cl.Nodes) != 2 || !cl.Nodes[1].SSHOpen || cl.Nodes[0].JobID != a1.UID || len(cl.Running) != 1 {
		t.Errorf("snapshot nodes %+v running %+v", cl.Nodes, cl.Running)
	}
	if err := s.Save(w.ctx, w.db); err != nil {
		t.Fatal(err)
	}
	stored, err := store.ShareUsages(w.ctx, w.db.Q(), c.ID)
	if err != nil || stored["alice"].Held != 1 {
		t.Fatalf("stored usage %+v, %v", stored, err)
	}
	// An hour later with the same holding: the record stands (decide
	// advances it to now), nothing is written.
	again, err := fairshare.Read(w.ctx, w.db.Q(), c, nodes, 2, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if u, r := again.Usage["alice"], stored["alice"]; u.Value != r.Value || !u.At.Equal(r.At) || u.Held != r.Held {
		t.Errorf("usage read back %+v, stored %+v: an unchanged holding is read as stored", u, r)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
