package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// What official clients send and expect of jobs: Azure's asset names (with
// dots, as the curated environments have), "azureml:NAME@latest", and a
// services map in every answer (azure-ai-ml reads it unconditionally).
func TestJobsAsOfficialClientsUseThem(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	const env = "AzureML-sklearn-1.0-ubuntu20.04-py38-cpu"
	envPath := hWSPath + "/environments/" + env + "/versions/"
	h.do("PUT", envPath+"1", map[string]any{"properties": map[string]any{"image": "python:3.10-slim"}}).want(t, 201)
	h.do("PUT", envPath+"1.1", map[string]any{"properties": map[string]any{"image": "python:3.11-slim"}}).want(t, 201)
	h.do("PUT", hWSPath+"/environments/bad$name/versions/1", map[string]any{"properties": map[string]any{"image": "python:3.11-slim"}}).want(t, 400, api.CodeInvalidName)

	job := func(envID string) map[string]any {
		b := jobBody("cpu")
		b["properties"].(map[string]any)["environmentId"] = envID
		return b
	}
	var j api.Job
	h.do("PUT", hWSPath+"/jobs/latest", job("azureml:"+env+"@latest")).want(t, 201).json(t, &j)
	if j.Properties.Image != "python:3.11-slim" {
		t.Errorf("@latest ran in %q, want the newest version's image python:3.11-slim", j.Properties.Image)
	}
	st := j.Properties.Services["Studio"]
	if st.JobServiceType != "Studio" || !strings.HasSuffix(st.Endpoint, "/#/jobs/latest") {
		t.Errorf("services %+v", j.Properties.Services)
	}
	h.do("PUT", hWSPath+"/jobs/pinned", job("azureml:"+env+":1")).want(t, 201).json(t, &j)
	if j.Properties.Image != "python:3.10-slim" {
		t.Errorf("version 1 ran in %q", j.Properties.Image)
	}
	h.do("PUT", hWSPath+"/jobs/none", job("azureml:nosuch@latest")).want(t, 400, api.CodeValidationError)

	// Services are the server's to fill: a client's are not stored.
	b := job("azureml:" + env + ":1")
	b["properties"].(map[string]any)["services"] = map[string]any{"Evil": map[string]any{"jobServiceType": "Custom", "endpoint": "https://example.invalid"}}
	h.do("PUT", hWSPath+"/jobs/svc", b).want(t, 201)
	h.do("GET", hWSPath+"/jobs/svc", nil).want(t, 200).json(t, &j)
	if _, ok := j.Properties.Services["Evil"]; ok || len(j.Properties.Services) != 1 {
		t.Errorf("services after GET: %+v", j.Properties.Services)
	}
}

// Start, stop and restart exist for compute instances only: on a cluster
// they answer as Azure answers a call a compute type lacks.
func TestComputeInstanceActionsOnACluster(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	for _, a := range []string{"start", "stop", "restart"} {
		r := h.do("POST", computePath("cpu")+"/"+a, nil).want(t, 400, api.CodeUserError)
		var e api.ErrorResponse
		r.json(t, &e)
		want := "Compute" + strings.ToUpper(a[:1]) + a[1:] + " with computeType AmlCompute is not supported."
		if e.Error.Message != want {
			t.Errorf("%s: %q, want %q", a, e.Error.Message, want)
		}
		h.do("POST", computePath("nosuch")+"/"+a, nil).want(t, 404, api.CodeNotFound)
	}
	if c := h.do("GET", computePath("cpu"), nil).want(t, 200).compute(t); c.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("after the refused actions: %s", c.Properties.ProvisioningState)
	}
}
