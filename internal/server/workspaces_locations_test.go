package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func wsPath(rg, ws string) string {
	return "/subscriptions/" + hSub + "/resourceGroups/" + rg + "/providers/Microsoft.MachineLearningServices/workspaces/" + ws
}

func names[T any](items []T, name func(T) string) map[string]bool {
	m := map[string]bool{}
	for _, it := range items {
		m[name(it)] = true
	}
	return m
}

func TestWorkspaces(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	body := map[string]any{"location": hLoc, "tags": map[string]string{"env": "test"},
		"properties": map[string]any{"friendlyName": "Second", "description": "two"}}
	r := h.do("PUT", wsPath(hRG, "ws2"), body).want(t, 201)
	var w api.Workspace
	r.json(t, &w)
	if w.ID != wsPath(hRG, "ws2") || w.Name != "ws2" || w.Type != api.TypeWorkspace || w.Location != hLoc ||
		w.Properties.ProvisioningState != "Succeeded" || w.Properties.WorkspaceID == "" || w.Properties.CreationTime == nil || w.Tags["env"] != "test" {
		t.Errorf("PUT workspace %+v", w)
	}
	if r.Header.Get("ETag") == "" {
		t.Error("no ETag")
	}
	wsID := w.Properties.WorkspaceID
	body["properties"].(map[string]any)["description"] = "two, changed"
	h.do("PUT", wsPath(hRG, "ws2"), body).want(t, 200).json(t, &w)
	if w.Properties.WorkspaceID != wsID || w.Properties.Description != "two, changed" {
		t.Errorf("update changed the workspace id or lost the description: %+v", w.Properties)
	}
	h.do("PUT", wsPath(hRG, "ws2"), map[string]any{"location": "eastus"}).want(t, 400, "PropertyChangeNotAllowed")
	h.do("PUT", wsPath(hRG, "w!"), map[string]any{}).want(t, 400)
	r = h.do("GET", wsPath(hRG, "ws2"), nil).want(t, 200)
	r.json(t, &w)
	if w.Properties.Description != "two, changed" || r.Header.Get("ETag") == "" {
		t.Errorf("GET workspace %+v", w)
	}
	h.do("PUT", wsPath("rg2", "ws3"), map[string]any{}).want(t, 201)

	var page api.Page[api.Workspace]
	h.do("GET", "/subscriptions/"+hSub+"/resourceGroups/"+hRG+"/providers/Microsoft.MachineLearningServices/workspaces", nil).want(t, 200).json(t, &page)
	got := names(page.Value, func(w api.Workspace) string { return w.Name })
	if len(got) != 2 || !got[hWS] || !got["ws2"] {
		t.Errorf("list by resource group: %v", got)
	}
	var all []api.Workspace
	link := "/subscriptions/" + hSub + "/providers/Microsoft.MachineLearningServices/workspaces"
	for link != "" {
		page = api.Page[api.Workspace]{}
		h.do("GET", link, nil).want(t, 200).json(t, &page)
		all = append(all, page.Value...)
		link = page.NextLink
	}
	got = names(all, func(w api.Workspace) string { return w.Name })
	if len(got) != 3 || !got[hWS] || !got["ws2"] || !got["ws3"] {
		t.Errorf("list by subscription: %v", got)
	}
	page = api.Page[api.Workspace]{}
	h.do("GET", "/subscriptions/other/providers/Microsoft.MachineLearningServices/workspaces", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 0 {
		t.Errorf("another subscription lists %d workspaces", len(page.Value))
	}

	// An empty workspace is deleted at once.
	h.do("DELETE", wsPath("rg2", "ws3"), nil).want(t, 200)
	h.do("GET", wsPath("rg2", "ws3"), nil).want(t, 404)
	h.do("DELETE", wsPath("rg2", "ws3"), nil).want(t, 204)

	// A workspace with computes is not, unless forced.
	ws2 := wsPath(hRG, "ws2")
	for _, n := range []string{"c-one", "c-two"} {
		r := h.do("PUT", ws2+"/computes/"+n, computeBody()).want(t, 201)
		h.waitOp(r.Header.Get("Azure-AsyncOperation"))
	}
	r = h.do("DELETE", ws2, nil).want(t, 409, "Conflict")
	if !strings.Contains(string(r.Body), "2 compute") {
		t.Errorf("409 body does not say how many computes: %s", r.Body)
	}
	h.do("GET", ws2, nil).want(t, 200)
	h.do("GET", ws2+"/computes/c-one", nil).want(t, 200)

	r = h.do("DELETE", ws2+"?forceToPurge=true", nil).want(t, 202)
	h.absoluteLink(t, r.Header.Get("Location"))
	if st := h.waitOp(r.Header.Get("Azure-AsyncOperation")); st.Status != "Succeeded" {
		t.Fatalf("forced delete %+v", st)
	}
	h.do("GET", ws2, nil).want(t, 404)
	h.do("GET", ws2+"/computes/c-one", nil).want(t, 404)
	h.do("GET", ws2+"/computes/c-two", nil).want(t, 404)
	n, err := store.Count(context.Background(), h.db.Q(), store.KindCompute, api.Scope{Subscription: hSub, ResourceGroup: hRG, Workspace: "ws2"}.WorkspaceID())
	if err != nil || n != 0 {
		t.Errorf("computes left in the store: %d %v", n, err)
	}
	// The default workspace is untouched.
	h.do("GET", hWSPath, nil).want(t, 200)
}

// TestGetMissingWorkspaceCode: GET of a workspace that does not exist is
// a 404 ResourceNotFound in ARM; ParentResourceNotFound is for children.
func TestGetMissingWorkspaceCode(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.do("GET", wsPath(hRG, "nows"), nil).want(t, 404)
	if code := r.errCode(t); code != "ResourceNotFound" {
		t.Fatalf("GET of a missing workspace answers code %q, want ResourceNotFound (server/workspaces.go workspace() is shared with child routes)", code)
	}
}

// TestComputeIntoWorkspaceBeingDeleted: once a forced workspace delete is
// accepted, the workspace must not take new computes, or its delete
// operation waits for ever.
func TestComputeIntoWorkspaceBeingDeleted(t *testing.T) {
	h := newHarness(t, harnessOpts{manualOps: true})
	ctx := context.Background()
	ws := wsPath(hRG, "doomed")
	h.do("PUT", ws, map[string]any{}).want(t, 201)
	h.do("PUT", ws+"/computes/first", computeBody()).want(t, 201)
	if err := h.ops.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r := h.do("DELETE", ws+"?forceToPurge=true", nil).want(t, 202)
	op := r.Header.Get("Azure-AsyncOperation")
	late := h.do("PUT", ws+"/computes/late", computeBody())
	for range 5 {
		if err := h.ops.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var st api.OperationStatus
	h.do("GET", op, nil).want(t, 200).json(t, &st)
	if late.Status == 201 && st.Status == "InProgress" {
		t.Fatalf("PUT compute into a workspace with a pending forced delete is accepted (201) and the workspace delete operation then never finishes (still %s)", st.Status)
	}
	if st.Status != "Succeeded" {
		t.Errorf("workspace delete %+v (late PUT answered %d)", st, late.Status)
	}
}

func TestVMSizes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var list api.VMSizeList
	h.do("GET", hLocPath+"/vmSizes", nil).want(t, 200).json(t, &list)
	if len(list.Value) < 20 {
		t.Fatalf("%d sizes, want at least 20", len(list.Value))
	}
	byName := map[string]api.VMSize{}
	for _, s := range list.Value {
		byName[s.Name] = s
		if s.Family == "" || s.VCPUs <= 0 || s.MemoryGB <= 0 || s.OSVhdSizeMB <= 0 || len(s.SupportedComputeTypes) == 0 {
			t.Errorf("size %+v incomplete", s)
		}
		p := s.EstimatedVMPrices
		if p == nil || p.BillingCurrency != "USD" || p.UnitOfMeasure != "OneHour" || len(p.Values) == 0 {
			t.Errorf("size %s prices %+v", s.Name, p)
			continue
		}
		tiers := map[string]float64{}
		for _, v := range p.Values {
			if v.RetailPrice <= 0 || v.OSType != "Linux" {
				t.Errorf("size %s price %+v", s.Name, v)
			}
			tiers[v.VMTier] = v.RetailPrice
		}
		if _, ok := tiers["Standard"]; !ok {
			t.Errorf("size %s has no Standard price", s.Name)
		}
		if _, ok := tiers["LowPriority"]; ok != s.LowPriorityCapable {
			t.Errorf("size %s: LowPriority price present %v, lowPriorityCapable %v", s.Name, ok, s.LowPriorityCapable)
		}
		if lp, ok := tiers["LowPriority"]; ok && lp >= tiers["Standard"] {
			t.Errorf("size %s: low priority not cheaper", s.Name)
		}
	}
	ds3, ok := byName["Standard_DS3_v2"]
	if !ok || ds3.VCPUs != 4 || ds3.MemoryGB != 14 || ds3.Family != "standardDSv2Family" || ds3.MaxResourceVolumeMB != 28672 {
		t.Errorf("Standard_DS3_v2 = %+v", ds3)
	}
	if h100 := byName["Standard_NC40ads_H100_v5"]; h100.LowPriorityCapable || h100.GPUs != 1 {
		t.Errorf("H100 %+v", h100)
	}
}

func TestUsagesAndQuotas(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var usages api.Page[api.Usage]
	h.do("GET", hLocPath+"/usages", nil).want(t, 200).json(t, &usages)
	if len(usages.Value) < 3 {
		t.Fatalf("%d usage rows", len(usages.Value))
	}
	byName := map[string]api.Usage{}
	for _, u := range usages.Value {
		byName[u.Name.Value] = u
		if u.Unit != "Count" || u.AmlWorkspaceLocation != hLoc || u.ID == "" || u.Type == "" || u.Name.LocalizedValue == "" || u.CurrentValue != 0 {
			t.Errorf("usage row %+v", u)
		}
	}
	if byName["TotalDedicatedCores"].Limit != 1000 || byName["TotalLowPriorityCores"].Limit != 500 || byName["standardDSv2Family"].Limit != 400 {
		t.Errorf("limits from the config: %+v", byName)
	}

	var quotas api.Page[api.Quota]
	h.do("GET", hLocPath+"/quotas", nil).want(t, 200).json(t, &quotas)
	if len(quotas.Value) < 3 {
		t.Fatalf("%d quota rows", len(quotas.Value))
	}
	for _, q := range quotas.Value {
		if !strings.HasPrefix(q.ID, hLocPath+"/quotas/") || q.Type != api.QuotaType || q.Unit != "Count" || q.Name.Value == "" {
			t.Errorf("quota row %+v", q)
		}
	}

	var res api.Page[api.QuotaUpdate]
	h.do("POST", hLocPath+"/updateQuotas", map[string]any{"location": hLoc, "value": []map[string]any{
		{"id": hLocPath + "/quotas/standarddsv2family", "limit": 48, "unit": "Count"},
		{"id": hLocPath + "/quotas/TotalLowPriorityCores", "limit": 64},
		{"id": hLocPath + "/quotas/Standard_Bogus_Family", "limit": 10},
		{"id": hLocPath + "/quotas/standardDv2Family", "limit": -1},
	}}).want(t, 200).json(t, &res)
	if len(res.Value) != 4 {
		t.Fatalf("updateQuotas answered %d rows", len(res.Value))
	}
	for i, want := range []string{"Success", "Success", "InvalidVMFamilyName", "InvalidQuotaBelowClusterMinimum"} {
		if res.Value[i].Status != want {
			t.Errorf("row %d status %q, want %q (%+v)", i, res.Value[i].Status, want, res.Value[i])
		}
	}
	if !strings.HasSuffix(res.Value[0].ID, "/quotas/standardDSv2Family") {
		t.Errorf("family not canonicalised: %s", res.Value[0].ID)
	}
	quotas = api.Page[api.Quota]{}
	h.do("GET", hLocPath+"/quotas", nil).want(t, 200).json(t, &quotas)
	q := map[string]int64{}
	for _, r := range quotas.Value {
		q[r.Name.Value] = r.Limit
	}
	if q["standardDSv2Family"] != 48 || q["TotalLowPriorityCores"] != 64 || q["standardDv2Family"] != 400 {
		t.Errorf("quotas after update: %v", q)
	}
	usages = api.Page[api.Usage]{}
	h.do("GET", hLocPath+"/usages", nil).want(t, 200).json(t, &usages)
	for _, u := range usages.Value {
		if u.Name.Value == "standardDSv2Family" && u.Limit != 48 {
			t.Errorf("usage limit not updated: %+v", u)
		}
	}
	// Limits are per location.
	other := "/subscriptions/" + hSub + "/providers/Microsoft.MachineLearningServices/locations/eastus/quotas"
	quotas = api.Page[api.Quota]{}
	h.do("GET", other, nil).want(t, 200).json(t, &quotas)
	for _, r := range quotas.Value {
		if r.Name.Value == "standardDSv2Family" && r.Limit != 400 {
			t.Errorf("eastus got westus2's limit: %+v", r)
		}
	}
	h.do("POST", hLocPath+"/updateQuotas", map[string]any{"value": []any{}}).want(t, 400, "ValidationError")
	h.do("POST", hLocPath+"/updateQuotas", `{}`).want(t, 400, "ValidationError")
	h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/bad%20loc/usages", nil).want(t, 400)
}
