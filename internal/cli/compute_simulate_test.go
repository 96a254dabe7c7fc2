package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
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
	csv, n := historyTrace(comp, jobs)
	want := "submit_time_s,duration_s,nodes\n0.000,60.000,1\n40.000,30.000,1\n90.000,240.000,2\n"
	if n != 3 || csv != want {
		t.Fatalf("trace (%d jobs) =\n%s\nwant\n%s", n, csv, want)
	}
}
