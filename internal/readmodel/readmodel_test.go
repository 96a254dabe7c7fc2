package readmodel_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/readmodel"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/ui"
)

func open(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStudioReadsComputesNodesAndQueue(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	r := readmodel.New(db)
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	if loads, err := r.ComputeLoads(ctx); err != nil || len(loads) != 0 {
		t.Fatalf("empty store: %+v %v", loads, err)
	}

	sc := api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}
	id := sc.ComputeID("gpu")
	comp := api.Compute{ID: id, Name: "gpu"}
	comp.Properties.ComputeType = api.ComputeTypeAml
	comp.Aml().TargetNodeCount = 2
	if _, err := store.Put(ctx, db.W(), store.KindCompute, sc.WorkspaceID(), "gpu", comp, store.IfNoneMatch, now); err != nil {
		t.Fatal(err)
	}
	idle := store.Node{ID: "tvm-idle", Compute: id, State: api.NodeIdle, Created: now.Add(-time.Hour), Ready: now.Add(-50 * time.Minute), IdleSince: now.Add(-time.Minute)}
	prep := store.Node{ID: "tvm-prep", Compute: id, State: api.NodePreparing, Created: now}
	for _, n := range []store.Node{idle, prep} {
		if err := store.PutNode(ctx, db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	j := api.Job{Name: "train"}
	j.Properties.Status = api.JobQueued
	j.Properties.Resources = &api.JobResources{InstanceCount: 3}
	if err := store.InsertJob(ctx, db.W(), &store.Job{UID: secret.NewID(), Parent: sc.WorkspaceID(), Compute: id, Created: now, Doc: j}); err != nil {
		t.Fatal(err)
	}

	loads, err := r.ComputeLoads(ctx)
	if err != nil || len(loads) != 1 {
		t.Fatalf("loads: %+v %v", loads, err)
	}
	l := loads[0]
	if l.ID != id || l.Name != "gpu" || l.Target != 2 || l.Nodes[api.NodeIdle] != 1 || l.Nodes[api.NodePreparing] != 1 ||
		l.QueuedJobs != 1 || l.QueuedNodes != 3 {
		t.Fatalf("load %+v", l)
	}

	nodes, err := r.NodesOf(ctx, strings.ToUpper(id)) // ARM ids are case-insensitive
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes: %+v %v", nodes, err)
	}
	for _, n := range nodes {
		want := map[string]store.Node{idle.ID: idle, prep.ID: prep}[n.ID]
		if n.State != want.State || !n.Created.Equal(want.Created) || !n.Ready.Equal(want.Ready) || !n.IdleSince.Equal(want.IdleSince) {
			t.Errorf("node %+v, stored %+v", n, want)
		}
	}
	if nodes, err := r.NodesOf(ctx, sc.ComputeID("none")); err != nil || len(nodes) != 0 {
		t.Fatalf("nodes of a missing compute: %+v %v", nodes, err)
	}
}

func TestStudioTokenByHashSaysNotFoundInTheStudiosTerms(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	r := readmodel.New(db)
	exp := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := store.InsertToken(ctx, db.W(), store.Token{ID: "t1", Name: "alice", Hash: secret.Hash("cml_alice"), Role: "Reader",
		Created: exp.Add(-time.Hour), Expires: exp}); err != nil {
		t.Fatal(err)
	}
	tok, err := r.TokenByHash(ctx, secret.Hash("cml_alice"))
	if err != nil || tok.Name != "alice" || !tok.Expires.Equal(exp) || tok.Revoked {
		t.Fatalf("token: %+v %v", tok, err)
	}
	_, err = r.TokenByHash(ctx, secret.Hash("cml_nobody"))
	if !errors.Is(err, ui.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing token: %v; want both ui.ErrNotFound and store.ErrNotFound", err)
	}
}
