package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// azureSweepYAML has the shape of Azure ML's documented sweep job
// (reference-yaml-job-sweep), every distribution and policy field used.
const azureSweepYAML = `$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
type: sweep
trial:
  command: >-
    python train.py
    --lr ${{search_space.lr}}
    --boosting ${{search_space.boosting}}
  environment:
    image: python:3.12
inputs:
  iris_csv:
    type: uri_file
    path: https://azuremlexamples.blob.core.windows.net/datasets/iris.csv
compute: azureml:cpu-cluster
sampling_algorithm:
  type: random
  seed: 999
search_space:
  lr:
    type: uniform
    min_value: 0.01
    max_value: 0.9
  boosting:
    type: choice
    values: ["gbdt", "dart"]
  depth:
    type: randint
    upper: 8
  decay:
    type: qlognormal
    mu: 0
    sigma: 1
    q: 2
objective:
  goal: minimize
  primary_metric: test-multi_logloss
limits:
  max_total_trials: 20
  max_concurrent_trials: 10
  timeout: 7200
  trial_timeout: 600
early_termination:
  type: bandit
  evaluation_interval: 2
  delay_evaluation: 1
  slack_factor: 0.1
display_name: lightgbm-iris-sweep-example
experiment_name: lightgbm-iris-sweep-example
description: Run a hyperparameter sweep job for LightGBM on Iris dataset.
`

func TestSweepYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.yml")
	if err := os.WriteFile(path, []byte(azureSweepYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadYAML[JobSpec](path)
	if err != nil {
		t.Fatal(err)
	}
	spec.Name = "sw"
	j, err := spec.toARM(context.Background(), &client.Client{Scope: specScope}, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Properties
	got, _ := json.Marshal(map[string]any{"trial": p.Trial, "searchSpace": p.SearchSpace, "samplingAlgorithm": p.SamplingAlgorithm,
		"objective": p.Objective, "limits": p.Limits, "earlyTermination": p.EarlyTermination, "jobType": p.JobType, "command": p.Command})
	want := `{"command":"","earlyTermination":{"policyType":"bandit","evaluationInterval":2,"delayEvaluation":1,"slackFactor":0.1},` +
		`"jobType":"Sweep","limits":{"jobLimitsType":"Sweep","timeout":"PT7200S","maxConcurrentTrials":10,"maxTotalTrials":20,"trialTimeout":"PT600S"},` +
		`"objective":{"goal":"minimize","primaryMetric":"test-multi_logloss"},"samplingAlgorithm":{"samplingAlgorithmType":"random","seed":999},` +
		`"searchSpace":{"boosting":["choice",[["gbdt","dart"]]],"decay":["qlognormal",[0,1,2]],"depth":["randint",[8]],"lr":["uniform",[0.01,0.9]]},` +
		`"trial":{"command":"python train.py --lr ${{search_space.lr}} --boosting ${{search_space.boosting}}","environmentId":"image:python:3.12"}}`
	if string(got) != want {
		t.Errorf("sweep as REST:\n got %s\nwant %s", got, want)
	}
	// What the server will check passes.
	if err := api.PrepareJob(&j, "sw"); err != nil {
		t.Errorf("PrepareJob: %v", err)
	}
	// job show prints it back in the YAML's names.
	view, _ := json.Marshal(jobFromARM(j, ""))
	for _, want := range []string{`"type":"sweep"`, `"boosting":{"type":"choice","values":["gbdt","dart"]}`, `"decay":{"mu":0,"q":2,"sigma":1,"type":"qlognormal"}`,
		`"sampling_algorithm":{"seed":999,"type":"random"}`, `"objective":{"goal":"minimize","primary_metric":"test-multi_logloss"}`,
		`"limits":{"timeout":7200,"max_total_trials":20,"max_concurrent_trials":10,"trial_timeout":600}`,
		`"early_termination":{"delay_evaluation":1,"evaluation_interval":2,"slack_factor":0.1,"type":"bandit"}`} {
		if !strings.Contains(string(view), want) {
			t.Errorf("job show lacks %s:\n%s", want, view)
		}
	}
	// A command job with sweep fields, or a sweep without trial, is refused.
	spec.Type = "command"
	if _, err := spec.toARM(context.Background(), &client.Client{Scope: specScope}, "."); err == nil {
		t.Error("a command job with search_space was taken")
	}
}

// TestDocsSweepYAML: the sweep YAML docs/cli.md shows converts and passes
// the server's checks as it is.
func TestDocsSweepYAML(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\n$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json\n"
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatal("docs/cli.md shows no sweep YAML")
	}
	body := string(doc)[i+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sweep.yml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadYAML[JobSpec](filepath.Join(dir, "sweep.yml"))
	if err != nil {
		t.Fatal(err)
	}
	spec.Code, spec.Trial.Code = "", "" // the code folder is the reader's own
	spec.Name = "lightgbm-sweep"
	j, err := spec.toARM(context.Background(), &client.Client{Scope: specScope}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.PrepareJob(&j, j.Name); err != nil {
		t.Fatal(err)
	}
	if p := j.Properties; p.Limits.MaxTotalTrials != 20 || p.EarlyTermination.PolicyType != "Bandit" || len(p.SearchSpace) != 2 {
		t.Errorf("sweep: %+v", p)
	}
}
