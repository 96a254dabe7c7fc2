package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/sim"
)

func TestHistoryTraceFromFinishedJobs(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { x := t0.Add(time.Duration(s) * time.Second); return &x }
	comp := api.Compute{ID: "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/computes/c"}
	job := func(compute string, queued, start, end int, nodes int32, attempts []api.Attempt) api.Job {
		j := api.Job{Properties: api.JobProperties{ComputeID: compute, StartTime: at(start), EndTime: at(end),
			Resources: &api.JobResources{InstanceCount: nodes}, Attempts: attempts}}
		j.Properties.History = []api.StatusChange{{Status: api.JobQueued, Time: *at(queued)}}
		return j
	}
	jobs := []api.Job{
		job(comp.ID, 100, 160, 400, 2, nil),
		job(strings.ToUpper(comp.ID), 10, 20, 80, 1, nil), // ids compare ignoring case
		job("/other/computes/x", 0, 1, 2, 1, nil),         // another cluster's job
		// requeued once: the run that finished counts, not the waits
		job(comp.ID, 50, 55, 500, 1, []api.Attempt{{Started: at(55), Ended: at(60)}, {Started: at(300), Ended: at(330)}}),
		{Properties: api.JobProperties{ComputeID: comp.ID}}, // never ran
	}
	// Its team: its fair-share group, else who submitted it.
	jobs[0].SystemData = &api.SystemData{CreatedBy: "alice"}
	team := "vision,2"
	jobs[1].Properties.FairShareGroup = &team
	csv, n := historyTrace(comp, jobs)
	want := "submit_time_s,duration_s,nodes,vc\n0.000,60.000,1,\"vision,2\"\n40.000,30.000,1,-\n90.000,240.000,2,alice\n"
	if n != 3 || csv != want {
		t.Fatalf("trace (%d jobs) =\n%s\nwant\n%s", n, csv, want)
	}
}

// A replay runs with the compute's own settings, its idle policy included,
// unless flags say otherwise.
func TestSimulateUsesComputeSettings(t *testing.T) {
	four, w := int32(4), 1.5
	comp := api.Compute{Properties: api.ComputeProperties{Properties: &api.AmlComputeProperties{VMSize: "Standard_NC6s_v3",
		VMPriority: api.PriorityLowPriority, ScaleSettings: &api.ScaleSettings{MaxNodeCount: &four, NodeIdleTimeBeforeScaleDown: "PT10M"},
		IdlePolicy: &api.IdlePolicy{Kind: api.IdlePolicyAdaptive, DelayWeight: &w}}}}
	none := func(string) bool { return false }
	f := simFlags{policy: sim.PolicyFixed, delayWeight: 3.25}
	f.fromCompute(comp, none)
	if f.size != "Standard_NC6s_v3" || f.tier != "low_priority" || f.max != 4 || f.idle != "600s" || f.policy != sim.PolicyAdaptive || f.delayWeight != 1.5 {
		t.Errorf("flags %+v; want the compute's settings, adaptive with weight 1.5", f)
	}
	f = simFlags{policy: sim.PolicyFixed, delayWeight: 3.25}
	f.fromCompute(comp, func(flag string) bool { return flag == "policy" || flag == "delay-weight" })
	if f.policy != sim.PolicyFixed || f.delayWeight != 3.25 {
		t.Errorf("flags %+v; want --policy and --delay-weight kept", f)
	}
	comp.Aml().IdlePolicy = nil
	f = simFlags{policy: sim.PolicyFixed}
	f.fromCompute(comp, none)
	if f.policy != sim.PolicyFixed {
		t.Errorf("policy %q for a compute without an idle policy; want fixed", f.policy)
	}
}
