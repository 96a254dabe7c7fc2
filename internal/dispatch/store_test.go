package dispatch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// fixture is a real SQLite store holding one compute, for the functions
// that read and write the store.
type fixture struct {
	t    testing.TB
	ctx  context.Context
	db   *store.DB
	path string // the store's file
	ws   string // the workspace id
	c    api.Compute
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sc := api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}
	min, max := int32(0), int32(4)
	c := api.Compute{Name: "gpu", Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2", VMPriority: api.PriorityDedicated,
			ScaleSettings: &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max}}}}
	if err := api.PrepareCompute(&c, c.Name, nil, "local"); err != nil {
		t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = sc.ComputeID(c.Name), api.StateSucceeded
	if _, err := store.Put(ctx, db.W(), store.KindCompute, sc.WorkspaceID(), c.Name, c, 0, t0); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, db: db, path: path, ws: sc.WorkspaceID(), c: c}
}

// reopen opens the store's file again, as a restarted server would: its
// server reads rows it wrote from what it wrote, not a change another
// program made to the file.
func (f *fixture) reopen() {
	f.t.Helper()
	f.db.Close()
	db, err := store.OpenSQLite(f.ctx, f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	f.db = db
}

// node stores node id of the compute in state, holding job uid ("" none).
func (f *fixture) node(id, state, uid string) store.Node {
	f.t.Helper()
	n := store.Node{ID: id, Compute: f.c.ID, State: state, JobID: uid, Priority: api.PriorityDedicated, VMSize: "Standard_DS3_v2",
		Address: "10.0.0." + id[len(id)-1:], Created: t0, IdleSince: t0}
	if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// job stores a job on the compute; with nodes it is in its first attempt
// there, in status.
func (f *fixture) job(uid, status string, nodes ...string) store.Job {
	f.t.Helper()
	j := job(uid, status, 0)
	j.Parent, j.Compute, j.Created = f.ws, f.c.ID, t0
	j.Doc.Properties.ComputeID = f.c.ID
	j.Doc.Properties.Resources = &api.JobResources{InstanceCount: int32(max(len(nodes), 1))}
	if len(nodes) > 0 {
		j.Attempt, j.Nodes = 1, nodes
		j.Doc.Properties.Attempts = []api.Attempt{{Number: 1, Nodes: nodes}}
	}
	if err := store.InsertJob(f.ctx, f.db.W(), &j); err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) getNode(id string) store.Node {
	f.t.Helper()
	n, err := store.GetNode(f.ctx, f.db.Q(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) getJob(uid string) store.Job {
	f.t.Helper()
	j, err := store.GetJobByUID(f.ctx, f.db.Q(), uid)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// tx runs fn in one transaction and fails the test on an error.
func (f *fixture) tx(fn func(q store.Querier) error) {
	f.t.Helper()
	if err := f.db.Tx(f.ctx, fn); err != nil {
		f.t.Fatal(err)
	}
}
