package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/controller"
)

// sweepBody is a SweepJob as the Azure SDKs send it (2024-04-01).
func sweepBody(mut ...func(p map[string]any)) map[string]any {
	p := map[string]any{
		"jobType":   "Sweep",
		"computeId": computePath("cpu"),
		"trial": map[string]any{"command": "python train.py --lr ${{search_space.lr}} --bs ${{search_space.bs}}",
			"environmentId": "image:python:3.12"},
		"searchSpace":       map[string]any{"lr": []any{"loguniform", []any{-6, -1}}, "bs": []any{"choice", []any{[]any{16, 32}}}},
		"samplingAlgorithm": map[string]any{"samplingAlgorithmType": "Random", "seed": 42},
		"objective":         map[string]any{"goal": "Maximize", "primaryMetric": "val_acc"},
		"limits":            map[string]any{"jobLimitsType": "Sweep", "maxTotalTrials": 4, "maxConcurrentTrials": 2, "trialTimeout": "PT10M"},
		"earlyTermination":  map[string]any{"policyType": "Bandit", "slackFactor": 0.1, "evaluationInterval": 1, "delayEvaluation": 2},
	}
	for _, m := range mut {
		m(p)
	}
	return map[string]any{"properties": p}
}

// TestSweepAPI: a sweep is accepted in Azure's shape, refused with one
// clear ARM error when wrong (storing nothing), creates its trials as
// child jobs listed under it, and a cancel cancels them.
func TestSweepAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	for _, c := range []struct {
		mut  func(p map[string]any)
		want string
	}{
		{func(p map[string]any) { p["searchSpace"] = map[string]any{"lr": []any{"gamma", []any{1}}} }, "unknown distribution"},
		{func(p map[string]any) { p["samplingAlgorithm"] = map[string]any{"samplingAlgorithmType": "Grid"} }, "grid sampling takes choice and randint"},
		{func(p map[string]any) { p["objective"] = map[string]any{"goal": "Up", "primaryMetric": "x"} }, "not Maximize or Minimize"},
		{func(p map[string]any) { p["trial"].(map[string]any)["command"] = "train ${{search_space.momentum}}" }, "does not define"},
		{func(p map[string]any) { delete(p["limits"].(map[string]any), "maxTotalTrials") }, "maxTotalTrials"},
		{func(p map[string]any) { p["earlyTermination"] = map[string]any{"policyType": "Bandit"} }, "slackFactor and slackAmount"},
		{func(p map[string]any) { p["command"] = "python train.py" }, "trial"},
	} {
		r := h.do("PUT", hWSPath+"/jobs/bad", sweepBody(c.mut)).want(t, 400, api.CodeValidationError)
		if !strings.Contains(string(r.Body), c.want) {
			t.Errorf("refusal %s does not say %q", r.Body, c.want)
		}
	}
	h.do("GET", hWSPath+"/jobs/bad", nil).want(t, 404)
	h.do("PUT", hWSPath+"/jobs/plain", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true",
		"computeId": computePath("cpu"), "limits": map[string]any{"maxTotalTrials": 3}}}).want(t, 400, api.CodeValidationError)

	var sw api.Job
	h.do("PUT", hWSPath+"/jobs/hd", sweepBody()).want(t, 201).json(t, &sw)
	if sw.Properties.JobType != "Sweep" || sw.Properties.Status != api.JobQueued || sw.Properties.Sweep.Seed != 42 || sw.Properties.Image != "python:3.12" {
		t.Fatalf("sweep as stored: %+v", sw.Properties)
	}
	sweeps := &controller.Sweeps{DB: h.db, Clock: clock.Real{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := sweeps.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	var trials api.Page[api.Job]
	h.do("GET", hWSPath+"/jobs?parentJobName=hd", nil).want(t, 200).json(t, &trials)
	if len(trials.Value) != 2 || trials.Value[0].Name != "hd_0" || trials.Value[0].Properties.ParentJobName != "hd" ||
		trials.Value[0].Properties.Limits.Timeout != "PT10M" || !strings.HasPrefix(trials.Value[0].Properties.Command, "python train.py --lr 0.") {
		t.Fatalf("trials: %+v", trials.Value)
	}
	h.do("POST", hWSPath+"/jobs/hd/cancel", nil).want(t, 202)
	if err := sweeps.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.do("GET", hWSPath+"/jobs/hd", nil).want(t, 200).json(t, &sw)
	var t0 api.Job
	h.do("GET", hWSPath+"/jobs/hd_0", nil).want(t, 200).json(t, &t0)
	if sw.Properties.Status != api.JobCanceled || t0.Properties.Status != api.JobCanceled {
		t.Fatalf("after cancel: sweep %s, trial %s", sw.Properties.Status, t0.Properties.Status)
	}
}
