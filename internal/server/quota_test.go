package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// setQuotas POSTs updateQuotas with name → limit entries (in the given
// order) and returns the answer's rows.
func (h *harness) setQuotas(loc string, entries ...any) []api.QuotaUpdate {
	h.t.Helper()
	base := "/subscriptions/" + hSub + "/providers/Microsoft.MachineLearningServices/locations/" + loc
	var value []map[string]any
	for i := 0; i+1 < len(entries); i += 2 {
		id := entries[i].(string)
		if !strings.HasPrefix(id, "/") {
			id = base + "/quotas/" + id
		}
		value = append(value, map[string]any{"id": id, "limit": entries[i+1], "unit": "Count"})
	}
	var res api.Page[api.QuotaUpdate]
	h.do("POST", base+"/updateQuotas", map[string]any{"location": loc, "value": value}).want(h.t, 200).json(h.t, &res)
	if len(res.Value) != len(value) {
		h.t.Fatalf("updateQuotas answered %d rows for %d entries", len(res.Value), len(value))
	}
	return res.Value
}

// limits reads the quotas of a location by name.
func (h *harness) limits(loc string) map[string]int64 {
	h.t.Helper()
	var page api.Page[api.Quota]
	h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/"+loc+"/quotas", nil).want(h.t, 200).json(h.t, &page)
	out := map[string]int64{}
	for _, q := range page.Value {
		out[q.Name.Value] = q.Limit
	}
	return out
}

// usages reads the usages of a location by name.
func (h *harness) usages(loc string) map[string]api.Usage {
	h.t.Helper()
	var page api.Page[api.Usage]
	h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/"+loc+"/usages", nil).want(h.t, 200).json(h.t, &page)
	out := map[string]api.Usage{}
	for _, u := range page.Value {
		out[u.Name.Value] = u
	}
	return out
}

func statuses(rows []api.QuotaUpdate) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

// sized is a compute body of a size, priority and scale.
func sized(size, priority string, min, max int) map[string]any {
	return computeBody(func(m map[string]any) {
		in := inner(m)
		in["vmSize"], in["vmPriority"] = size, priority
		in["scaleSettings"] = map[string]any{"minNodeCount": min, "maxNodeCount": max, "nodeIdleTimeBeforeScaleDown": "PT5M"}
	})
}

func inLocation(body map[string]any, loc string) map[string]any {
	body["location"] = loc
	return body
}

func (h *harness) putNode(compute, id, size, priority string) {
	h.t.Helper()
	n := store.Node{ID: id, Compute: computePath(compute), State: api.NodeIdle, Priority: priority, VMSize: size, Provider: "test", Created: time.Now()}
	if err := store.PutNode(context.Background(), h.db.W(), n); err != nil {
		h.t.Fatal(err)
	}
}

// refused checks that a compute PUT is refused with QuotaExceeded, names
// what it should, and stores nothing.
func (h *harness) refused(name string, body map[string]any, wantInMessage ...string) {
	h.t.Helper()
	r := h.do("PUT", computePath(name), body).want(h.t, 409, api.CodeQuotaExceeded)
	var e api.ErrorResponse
	r.json(h.t, &e)
	for _, w := range wantInMessage {
		if !strings.Contains(e.Error.Message, w) {
			h.t.Errorf("QuotaExceeded message %q lacks %q", e.Error.Message, w)
		}
	}
	h.do("GET", computePath(name), nil).want(h.t, 404)
	if _, err := store.Get[api.Compute](context.Background(), h.db.Q(), store.KindCompute, hWSPath, name); err == nil {
		h.t.Errorf("refused compute %s was stored", name)
	}
}

func TestCreateRefusedWhenMinNodesExceedQuota(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if got := statuses(h.setQuotas(hLoc, "standardDSv2Family", 8)); got[0] != api.QuotaStatusSuccess {
		t.Fatalf("set family quota: %v", got)
	}
	// 3 × Standard_DS3_v2 = 12 cores > 8.
	h.refused("too-big", sized("Standard_DS3_v2", "Dedicated", 3, 4),
		"too-big", "minNodeCount 3", "Standard_DS3_v2", "standardDSv2Family needs 12 more cores, 8 of 8 free in location westus2",
		"cumulus quota update --location westus2 --family standardDSv2Family --limit")
	var page api.Page[api.Compute]
	h.do("GET", hWSPath+"/computes", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 0 {
		t.Fatalf("computes after a refused create: %d", len(page.Value))
	}
	ops, err := store.PendingOperations(context.Background(), h.db.Q())
	if err != nil || len(ops) != 0 {
		t.Errorf("a refused create left %d operations (%v)", len(ops), err)
	}

	// Exactly the quota fits; the cores of existing nodes count against
	// the next cluster.
	h.create("fits", sized("Standard_DS3_v2", "Dedicated", 2, 4))
	h.putNode("fits", "n1", "Standard_DS3_v2", api.PriorityDedicated)
	h.refused("second", sized("Standard_DS3_v2", "Dedicated", 2, 2), "standardDSv2Family needs 8 more cores, 4 of 8 free in location westus2")
	h.create("small", sized("Standard_DS2_v2", "Dedicated", 2, 2)) // 4 cores: fits
	// Min 0 never needs quota.
	h.create("zero", sized("Standard_DS3_v2", "Dedicated", 0, 10))

	// Updating an existing cluster is not a create: no check.
	h.do("PUT", computePath("fits"), sized("Standard_DS3_v2", "Dedicated", 2, 6)).want(t, 200)

	// The total dedicated quota binds across families.
	// (the minimums of fits and small hold 12 cores: the total cannot go lower).
	if got := statuses(h.setQuotas(hLoc, "TotalDedicatedCores", 12)); got[0] != api.QuotaStatusSuccess {
		t.Fatalf("set total: %v", got)
	}
	h.refused("other-family", sized("Standard_F4s_v2", "Dedicated", 3, 3), // 12 cores; 4 used of 12
		"standardFSv2Family needs 12 more cores, 8 of 12 total dedicated cores free in location westus2", "--total --limit")

	// Low priority draws on its own pool, not the dedicated quotas.
	if got := statuses(h.setQuotas(hLoc, "TotalLowPriorityCores", 4)); got[0] != api.QuotaStatusSuccess {
		t.Fatalf("set low priority: %v", got)
	}
	h.create("low-fits", sized("Standard_DS2_v2", "LowPriority", 2, 2))
	h.putNode("low-fits", "lp1", "Standard_DS2_v2", api.PriorityLowPriority)
	h.refused("low-big", sized("Standard_F4s_v2", "LowPriority", 1, 2),
		"standardFSv2Family needs 4 more low-priority cores, 2 of 4 free in location westus2", "--low-priority --limit")

	// Quotas are per location: another location has the defaults.
	h.create("elsewhere", inLocation(sized("Standard_DS3_v2", "Dedicated", 3, 3), "eastus"))
}

func TestUpdateQuotasBelowClusterMinimum(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("ded", sized("Standard_DS3_v2", "Dedicated", 2, 4))   // holds 8 DSv2 cores
	h.create("low", sized("Standard_DS2_v2", "LowPriority", 1, 4)) // holds 2 low-priority cores
	h.create("ncs", sized("Standard_NC6s_v3", "Dedicated", 1, 1))  // holds 6 NCSv3 cores

	rows := h.setQuotas(hLoc,
		"standardDSv2Family", 7, // below 8
		"standardDSv2Family", 8, // exactly the minimum
		"TotalDedicatedCores", 13, // below 8 + 6
		"TotalDedicatedCores", 14,
		"TotalLowPriorityCores", 1, // below 2
		"standardNCSv3Family", 5, // below 6
		"standardDv2Family", 0, // no cluster of that family
	)
	want := []string{api.QuotaStatusBelowMinimum, api.QuotaStatusSuccess, api.QuotaStatusBelowMinimum, api.QuotaStatusSuccess,
		api.QuotaStatusBelowMinimum, api.QuotaStatusBelowMinimum, api.QuotaStatusSuccess}
	if got := statuses(rows); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	l := h.limits(hLoc)
	if l["standardDSv2Family"] != 8 || l["TotalDedicatedCores"] != 14 || l["TotalLowPriorityCores"] != 500 || l["standardNCSv3Family"] != 400 || l["standardDv2Family"] != 0 {
		t.Errorf("limits after the update: %v", l)
	}
	// Refused entries are answered with the id they were sent with.
	if !strings.HasSuffix(rows[0].ID, "/quotas/standardDSv2Family") || rows[0].Limit != 7 {
		t.Errorf("refused row %+v", rows[0])
	}
	// Another location holds none of these minimums.
	if got := statuses(h.setQuotas("eastus", "standardDSv2Family", 0, "TotalLowPriorityCores", 0)); got[0] != api.QuotaStatusSuccess || got[1] != api.QuotaStatusSuccess {
		t.Errorf("eastus: %v", got)
	}
	// Lowering a cluster's minimum frees the quota it held.
	h.do("PATCH", computePath("ded"), map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"minNodeCount": 0, "maxNodeCount": 4}}}}).want(t, 200)
	if got := statuses(h.setQuotas(hLoc, "standardDSv2Family", 0)); got[0] != api.QuotaStatusSuccess {
		t.Errorf("after min lowered to 0: %v", got)
	}
}

type countingNotifier struct{ n atomic.Int32 }

func (c *countingNotifier) Notify() { c.n.Add(1) }

func TestUpdateQuotasAzureNames(t *testing.T) {
	clusters := &countingNotifier{}
	h := newHarness(t, harnessOpts{clusters: clusters})
	azureID := "/subscriptions/" + hSub + "/resourceGroups/" + hRG + "/providers/Microsoft.MachineLearningServices/workspaces/" + hWS +
		"/quotas/Standard_NCSv3_Family_Cluster_Dedicated_vCPUs"
	rows := h.setQuotas(hLoc,
		"Standard_DSv2_Family_Cluster_Dedicated_vCPUs", 48,
		"Standard_NCASv3_T4_Family_Cluster_Dedicated_vCPUs", 16,
		azureID, 24,
		"totaldedicatedcores", 900,
		"Standard_Bogus_Family_Cluster_Dedicated_vCPUs", 4,
	)
	want := []string{"Success", "Success", "Success", "Success", "InvalidVMFamilyName"}
	if got := statuses(rows); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	for i, name := range []string{"standardDSv2Family", "standardNCASv3_T4Family", "standardNCSv3Family", "TotalDedicatedCores"} {
		if !strings.HasSuffix(rows[i].ID, hLocPath+"/quotas/"+name) {
			t.Errorf("row %d id %s, want the canonical %s", i, rows[i].ID, name)
		}
	}
	l := h.limits(hLoc)
	if l["standardDSv2Family"] != 48 || l["standardNCASv3_T4Family"] != 16 || l["standardNCSv3Family"] != 24 || l["TotalDedicatedCores"] != 900 {
		t.Errorf("limits %v", l)
	}
	if u := h.usages(hLoc); u["standardDSv2Family"].Limit != 48 || u["TotalDedicatedCores"].Limit != 900 {
		t.Errorf("usages do not show the new limits: %+v", u)
	}
	if clusters.n.Load() == 0 {
		t.Error("updateQuotas did not wake the cluster controller")
	}
}

// TestUsagesFollowNodes checks the usages against the node records at
// every step: nodes added and removed, dedicated and low priority, two
// families, and a cluster in another location.
func TestUsagesFollowNodes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("dss", sized("Standard_DS3_v2", "Dedicated", 0, 10))
	h.create("ncs", sized("Standard_NC6s_v3", "Dedicated", 0, 10))
	h.create("lps", sized("Standard_DS2_v2", "LowPriority", 0, 10))
	h.create("east", inLocation(sized("Standard_DS3_v2", "Dedicated", 0, 10), "eastus"))

	type step struct {
		do                  func()
		dsv2, ncsv3, lowPri int64 // westus2
		eastDSv2            int64
	}
	del := func(id string) func() {
		return func() {
			if err := store.DeleteNode(context.Background(), h.db.W(), id, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []step{
		{func() {}, 0, 0, 0, 0},
		{func() { h.putNode("dss", "ds-1", "Standard_DS3_v2", api.PriorityDedicated) }, 4, 0, 0, 0},
		{func() { h.putNode("dss", "ds-2", "Standard_DS3_v2", api.PriorityDedicated) }, 8, 0, 0, 0},
		{func() { h.putNode("ncs", "nc-1", "Standard_NC6s_v3", api.PriorityDedicated) }, 8, 6, 0, 0},
		{func() { h.putNode("lps", "lp-1", "Standard_DS2_v2", api.PriorityLowPriority) }, 8, 6, 2, 0},
		{func() { h.putNode("east", "east-1", "Standard_DS3_v2", api.PriorityDedicated) }, 8, 6, 2, 4},
		{del("ds-1"), 4, 6, 2, 4},
		{del("lp-1"), 4, 6, 0, 4},
		{del("nc-1"), 4, 0, 0, 4},
		{del("ds-2"), 0, 0, 0, 4},
	}
	for i, s := range steps {
		s.do()
		u := h.usages(hLoc)
		got := []int64{u["standardDSv2Family"].CurrentValue, u["standardNCSv3Family"].CurrentValue, u["TotalDedicatedCores"].CurrentValue, u["TotalLowPriorityCores"].CurrentValue}
		want := []int64{s.dsv2, s.ncsv3, s.dsv2 + s.ncsv3, s.lowPri}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d westus2 usage (DSv2, NCSv3, total, low priority) = %v, want %v", i, got, want)
		}
		e := h.usages("eastus")
		if e["standardDSv2Family"].CurrentValue != s.eastDSv2 || e["TotalDedicatedCores"].CurrentValue != s.eastDSv2 {
			t.Errorf("step %d eastus usage %d, want %d", i, e["standardDSv2Family"].CurrentValue, s.eastDSv2)
		}
	}
	// The rows have Azure's Usage shape.
	for name, r := range h.usages(hLoc) {
		if r.Unit != "Count" || r.AmlWorkspaceLocation != hLoc || r.Type == "" || r.ID == "" || r.Name.LocalizedValue == "" {
			t.Errorf("usage row %s: %+v", name, r)
		}
	}
	if u := h.usages(hLoc); u["TotalLowPriorityCores"].Type != api.UsageTypeLowPriority || u["standardDSv2Family"].Type != api.UsageTypeFamily ||
		u["standardDSv2Family"].Name.LocalizedValue != "Standard DSv2 Family Cluster Dedicated vCPUs" {
		t.Errorf("row types: %+v", u)
	}
}
