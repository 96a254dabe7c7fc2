package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A submit's answer says why the job waits as its cluster stands at that
// moment, counted from the cluster's nodes: growing while a node is
// still being prepared, nothing once the cluster has every node it
// wants; and a GET of the job says the same.
func TestSubmitAnswerSaysWhyTheJobWaits(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	h.create("grow", computeBody())
	// The cluster controller wants two nodes; one is being prepared.
	d, err := store.Get[api.Compute](ctx, h.db.Q(), store.KindCompute, hWSPath, "grow")
	if err != nil {
		t.Fatal(err)
	}
	d.Value.Aml().TargetNodeCount = 2
	if _, err := store.Put(ctx, h.db.W(), store.KindCompute, hWSPath, "grow", d.Value, d.Version, time.Now()); err != nil {
		t.Fatal(err)
	}
	node := func(id, state string) {
		t.Helper()
		if err := store.PutNode(ctx, h.db.W(), store.Node{ID: id, Compute: computePath("grow"), State: state,
			VMSize: "Standard_DS2_v2", Provider: "test", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	node("n1", api.NodePreparing)

	const growing = api.NodesWaitPrefix + "the cluster is growing; nodes are being provisioned"
	submit := func(name, want string) {
		t.Helper()
		var j api.Job
		h.do("PUT", hWSPath+"/jobs/"+name, jobBody("grow")).want(t, 201).json(t, &j)
		if p := j.Properties; p.Status != api.JobQueued || p.StatusMessage != want {
			t.Errorf("%s as its submit answered: %s %q, want Queued %q", name, p.Status, p.StatusMessage, want)
		}
		var got api.Job // a value of its own: an empty message is left out
		h.do("GET", hWSPath+"/jobs/"+name, nil).want(t, 200).json(t, &got)
		if p := got.Properties; p.StatusMessage != want {
			t.Errorf("%s as GET answers: %q, want %q", name, p.StatusMessage, want)
		}
	}
	submit("first", growing)

	// Both nodes up: the cluster is steady and nothing says why.
	node("n1", api.NodeIdle)
	node("n2", api.NodeIdle)
	submit("second", "")

	// One of them lost: growing again.
	if err := store.DeleteNode(ctx, h.db.W(), "n2", time.Now()); err != nil {
		t.Fatal(err)
	}
	submit("third", growing)
}
