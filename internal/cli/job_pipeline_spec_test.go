package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A batch-scoring pipeline in the shapes Azure ML's examples write: a
// step made from a command component file, a parallel step with the older
// task keys (type: function, args), an inline environment that names a
// registered one (name and version, with the image and conda file it was
// built from), an mltable input, a uri_file output bound to the pipeline's.
const pipelineYAML = `$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
display_name: batch-scoring
settings:
  default_compute: azureml:cpu-cluster
  continue_on_step_failure: false
inputs:
  table:
    type: mltable
    path: ./table
    mode: direct
  model:
    type: uri_folder
    path: ./model
    mode: download
outputs:
  predictions:
    type: uri_file
    mode: rw_mount
jobs:
  check:
    type: command
    component: ./components/check.yml
    inputs:
      model: ${{parent.inputs.model}}
  predict:
    type: parallel
    compute: azureml:cpu-cluster
    inputs:
      data: ${{parent.inputs.table}}
      model: ${{parent.jobs.check.outputs.checked}}
    outputs:
      scores: ${{parent.outputs.predictions}}
    mini_batch_size: "100kb"
    mini_batch_error_threshold: 5
    logging_level: "DEBUG"
    input_data: ${{inputs.data}}
    max_concurrency_per_instance: 2
    retry_settings:
      max_retries: 2
      timeout: 60
    task:
      type: function
      code: ./script
      entry_script: predict.py
      environment:
        name: "prs-env"
        version: 1
        image: mcr.microsoft.com/azureml/openmpi3.1.2-ubuntu18.04
        conda_file: ./environment/conda.yml
      args: >-
        --model ${{inputs.model}}
      append_row_to: ${{outputs.scores}}
`

const checkComponent = `$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: check_model
display_name: Check the model
version: 1
inputs:
  model:
    type: uri_folder
  strict:
    type: boolean
    default: true
outputs:
  checked:
    type: uri_folder
code: ./src
command: python check.py --model ${{inputs.model}} --strict ${{inputs.strict}} --out ${{outputs.checked}}
environment: azureml:prs-env:1
`

func TestPipelineYAML(t *testing.T) {
	dir := t.TempDir()
	for path, content := range map[string]string{"pipeline.yml": pipelineYAML, "components/check.yml": checkComponent,
		"components/src/check.py": "print(1)\n", "script/predict.py": "def init(): pass\n", "table/MLTable": "paths:\n  - file: ./t.csv\n",
		"table/t.csv": "a,b\n1,2\n", "model/m.pkl": "x", "environment/conda.yml": "name: x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := loadYAML[JobSpec](filepath.Join(dir, "pipeline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	spec.Name = "scoring"
	j, err := spec.toARM(context.Background(), nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	p := j.Properties
	if p.JobType != api.JobTypePipeline || !strings.HasSuffix(p.Settings.DefaultCompute, "/computes/cpu-cluster") || p.Inputs["table"].JobInputType != "mltable" ||
		p.Outputs["predictions"].JobOutputType != "uri_file" {
		t.Fatalf("pipeline %+v", p)
	}
	check, predict := p.Jobs["check"], p.Jobs["predict"]
	if check.Type != "command" || check.EnvironmentID != "azureml:prs-env:1" || !strings.Contains(check.Command, "--strict ${{inputs.strict}}") ||
		check.Inputs["strict"].Value != "true" || check.Inputs["model"].Value != "${{parent.inputs.model}}" || check.Outputs["checked"].JobOutputType != "uri_folder" {
		t.Fatalf("the component's step %+v", check.JobProperties)
	}
	if !strings.Contains(check.CodeID, "/codes/check/versions/") {
		t.Errorf("the component's code: %q", check.CodeID)
	}
	ps := predict.ParallelSpec
	if predict.Type != "parallel" || ps == nil || ps.Task.EntryScript != "predict.py" || ps.Task.ProgramArguments != "--model ${{inputs.model}}" ||
		ps.Task.Environment != "azureml:prs-env:1" || string(ps.MiniBatchSize) != "100kb" || *ps.MiniBatchErrorThreshold != 5 ||
		*ps.RetrySettings.MaxRetries != 2 || predict.Outputs["scores"].URI != "${{parent.outputs.predictions}}" ||
		predict.Inputs["model"].Value != "${{parent.jobs.check.outputs.checked}}" {
		t.Fatalf("the parallel step %+v %+v", predict.JobProperties, ps)
	}
	// The server's checks pass once the uploads have their digests.
	digest := strings.Repeat("a", 64)
	for k, in := range p.Inputs {
		in.URI = api.BlobURIScheme + digest
		p.Inputs[k] = in
	}
	j.Properties = p
	if err := api.PrepareJob(&j, "scoring"); err != nil {
		t.Fatalf("PrepareJob: %v", err)
	}
	if file := func() string {
		_, f := (&api.Job{Properties: j.Properties.Jobs["predict"].JobProperties}).ParallelRows()
		return f
	}(); file != api.DefaultRowsFile {
		t.Errorf("rows file %q", file)
	}
	// An inline environment that only has a conda file is refused with
	// what to do.
	bad := strings.Replace(pipelineYAML, "        name: \"prs-env\"\n        version: 1\n", "", 1)
	if err := os.WriteFile(filepath.Join(dir, "bad.yml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err = loadYAML[JobSpec](filepath.Join(dir, "bad.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spec.toARM(context.Background(), nil, dir); err == nil || !strings.Contains(err.Error(), "cumulus environment create") {
		t.Errorf("an environment to build: %v", err)
	}
}

// TestDocsPipelineYAML: the pipeline docs/cli.md shows converts and passes
// the server's checks as it is.
func TestDocsPipelineYAML(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\n$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json\n"
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatal("docs/cli.md shows no pipeline YAML")
	}
	body := string(doc)[i+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	dir := t.TempDir()
	for _, d := range []string{"make", "score", "count"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadYAML[JobSpec](filepath.Join(dir, "pipeline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := spec.toARM(context.Background(), nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.PrepareJob(&j, j.Name); err != nil {
		t.Fatal(err)
	}
	order, err := j.StepOrder()
	if err != nil || len(order) != 3 || order[1].Name != "score" {
		t.Fatalf("steps %+v %v", order, err)
	}
	if s := j.ParallelSettingsOf("score"); s.MiniBatchErrorThreshold != 1 || s.MaxRetries != 2 {
		t.Errorf("the parallel step's settings %+v", s)
	}
}
