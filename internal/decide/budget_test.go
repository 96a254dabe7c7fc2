package decide

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A spent budget: no node is created, the job that needed one waits with
// the budget as the reason, a job that fits an idle node still starts;
// scale-to-min also removes idle nodes above the minimum at once.
func TestHoldForBudget(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	c := Cluster{ID: "c", Min: 1, Max: 4, IdleTimeout: time.Hour, Headroom: -1,
		Nodes: []Node{
			{ID: "a", State: api.NodeIdle, IdleSince: now, Created: now},
			{ID: "b", State: api.NodeIdle, IdleSince: now, Created: now},
			{ID: "r", State: api.NodeRunning, JobID: "x", Created: now},
		},
		Queued: []Job{{ID: "j1", InstanceCount: 1, Seq: 1}, {ID: "j2", InstanceCount: 2, Seq: 2}},
	}
	p := Decide(c, now)
	if p.Create == 0 {
		t.Fatalf("the plan without a budget creates no node: %+v", p)
	}
	spent := api.BudgetHold{Name: "b", Percent: 100}
	c.Budgets = []api.BudgetHold{spent}
	held := Decide(c, now)
	want := api.Blocks{{Kind: api.BlockBudget, Budget: &spent}}
	if held.Create != 0 || !reflect.DeepEqual(held.Blocked, want) || len(held.Assign) != len(p.Assign) || len(held.Remove) != 0 {
		t.Errorf("stop-scale-up: %+v", held)
	}
	if held.Target != 3 {
		t.Errorf("target %d, want the 3 nodes there", held.Target)
	}
	// Nothing queued: scale to min removes idle nodes down to min 1 (the
	// running one counts).
	c.Queued = nil
	c.Budgets = []api.BudgetHold{{Name: "b", ToMin: true}}
	toMin := Decide(c, now)
	if !slices.Equal(toMin.Remove, []string{"a", "b"}) || toMin.Target != 1 || len(toMin.Blocked) != 0 {
		t.Errorf("scale-to-min: remove %v target %d blocked %v, want a and b gone, target 1", toMin.Remove, toMin.Target, toMin.Blocked)
	}
}
