package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A budget's amount, what it last found spent and whether its action is
// in force are gauges labelled with its workspace and name.
func TestBudgetGauges(t *testing.T) {
	db := openStore(t)
	m := New(Options{DB: db})
	b := api.Budget{ID: testScope.WorkspaceID() + "/budgets/team", Name: "team", Properties: api.BudgetProperties{Amount: 50,
		Status: &api.BudgetStatus{Spent: 61.5, Percent: 123, ActionActive: true}}}
	if _, err := store.Put(context.Background(), db.W(), store.KindBudget, testScope.WorkspaceID(), "team", b, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"workspace": "ws1", "budget": "team"}
	if got := gauge(t, m, "cumulus_budget_spent", labels); got != 61.5 {
		t.Errorf("spent = %v", got)
	}
	if got := gauge(t, m, "cumulus_budget_amount", labels); got != 50 {
		t.Errorf("amount = %v", got)
	}
	if got := gauge(t, m, "cumulus_budget_action_active", labels); got != 1 {
		t.Errorf("action active = %v", got)
	}
}
