package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The devices a node holds are kept with its record (a restarted control
// plane reads them back), and the nodes that hold some are found without
// reading the others; the node's history says which it holds.
func TestNodesHoldingGPUs(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const c = "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/w/computes/gpu"
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i, n := range []Node{
		{ID: "g1", Compute: c, State: api.NodePreparing, Priority: api.PriorityDedicated, VMSize: "Standard_NC12s_v3", Provider: "local", Created: at, GPUDevices: []string{"0", "1"}},
		{ID: "c1", Compute: c, State: api.NodeIdle, Created: at.Add(time.Second)},
		{ID: "g2", Compute: c, State: api.NodeIdle, Created: at.Add(2 * time.Second), GPUDevices: []string{"2:1"}},
	} {
		if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	got, err := NodesHoldingGPUs(ctx, db.Q())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "g1" || !slices.Equal(got[0].GPUDevices, []string{"0", "1"}) || got[1].ID != "g2" {
		t.Fatalf("NodesHoldingGPUs = %+v", got)
	}
	evs, err := Events(ctx, db.Q(), EventFilter{Compute: c, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e Event) bool {
		return e.Node == "g1" && e.Type == api.EventNodeRequested && e.Message == "a Dedicated Standard_NC12s_v3 node was requested from the local provider, holding GPU 0, 1"
	}) {
		t.Errorf("no request event naming the devices: %+v", evs)
	}
}
