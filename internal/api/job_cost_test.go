package api_test

import (
	"errors"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// limits.maxCost must be a positive amount; the read-only cost a client
// sends back is dropped.
func TestJobMaxCostValidated(t *testing.T) {
	job := func(maxCost float64) *api.Job {
		return &api.Job{Properties: api.JobProperties{Command: "true", ComputeID: "cpu",
			Limits: &api.JobLimits{MaxCost: &maxCost}, Cost: &api.JobCost{Amount: 99}}}
	}
	ok := job(2.5)
	if err := api.PrepareJob(ok, "j1"); err != nil {
		t.Fatalf("maxCost 2.5: %v", err)
	}
	if ok.Properties.Cost != nil || ok.MaxCost() != 2.5 || ok.Properties.Limits.JobLimitsType != "Command" {
		t.Errorf("prepared job %+v", ok.Properties)
	}
	for _, bad := range []float64{0, -1} {
		err := api.PrepareJob(job(bad), "j1")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeValidationError || e.Target != "properties.limits.maxCost" {
			t.Errorf("maxCost %v: %v, want a ValidationError on properties.limits.maxCost", bad, err)
		}
	}
}
