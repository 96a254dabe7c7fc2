package server_test

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Budgets: created with defaults filled, replaced keeping their status,
// refused when bad (ARM's error shape, nothing stored), and written only
// by a role that writes; a principal without a role reads nothing.
func TestBudgetsAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	path := hWSPath + "/budgets/team"
	var b api.Budget
	h.do("PUT", path, map[string]any{"properties": map[string]any{"amount": 100, "compute": "cpu", "action": "stop-scale-up"}}).want(t, 201).json(t, &b)
	p := b.Properties
	if p.Period != api.BudgetMonth || p.Action != api.BudgetStopScaleUp || len(p.Thresholds) != 3 || b.Type != api.TypeBudget || b.Name != "team" {
		t.Fatalf("created %+v", b)
	}
	h.do("PUT", path, map[string]any{"properties": map[string]any{"amount": 200, "compute": "cpu", "status": map[string]any{"spent": 5}}}).want(t, 200).json(t, &b)
	if b.Properties.Amount != 200 || b.Properties.Status != nil {
		t.Errorf("replaced %+v, want amount 200 and no client-made status", b.Properties)
	}
	for _, bad := range []map[string]any{
		{"amount": -1},
		{"amount": 1, "period": "Fortnight"},
		{"amount": 1, "action": "explode"},
		{"amount": 1, "compute": "nope"},
		{"amount": 1, "webhook": "ftp://x"},
		{"amount": 1, "compute": "cpu", "tag": map[string]any{"key": "a", "value": "b"}},
	} {
		r := h.do("PUT", hWSPath+"/budgets/bad", map[string]any{"properties": bad}).want(t, 400)
		checkErrorShape(t, "bad budget", r)
	}
	h.do("GET", hWSPath+"/budgets/bad", nil).want(t, 404)
	var page api.Page[api.Budget]
	h.do("GET", hWSPath+"/budgets", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 1 {
		t.Errorf("list = %+v, want the one budget", page.Value)
	}

	reader := h.user("reader", "Reader", hWSPath)
	stranger := h.user("stranger", "", "")
	h.as(reader, "GET", path, nil).want(t, 200)
	h.as(reader, "PUT", path, map[string]any{"properties": map[string]any{"amount": 1}}).want(t, 403, api.CodeForbidden)
	h.as(reader, "DELETE", path, nil).want(t, 403, api.CodeForbidden)
	h.as(stranger, "GET", path, nil).want(t, 403, api.CodeForbidden)
	h.as(stranger, "GET", hWSPath+"/costs", nil).want(t, 403, api.CodeForbidden)
	h.as(reader, "GET", hWSPath+"/costs", nil).want(t, 200)
	h.as(reader, "GET", "/subscriptions/"+hSub+"/resourceGroups/"+hRG+"/providers/Microsoft.MachineLearningServices/costs", nil).want(t, 403, api.CodeForbidden)
	h.do("GET", hWSPath+"/budgets/team", nil).want(t, 200).json(t, &b)
	if b.Properties.Amount != 200 {
		t.Errorf("a refused PUT changed the budget: %+v", b.Properties)
	}
	h.do("DELETE", path, nil).want(t, 200)
	h.do("DELETE", path, nil).want(t, 204)
}
