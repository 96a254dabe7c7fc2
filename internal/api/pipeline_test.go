package api

import (
	"encoding/json"
	"strings"
	"testing"
)

const ws = "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/w"

// scoringPipeline is a three-step pipeline as the REST API carries it.
func scoringPipeline() Job {
	var j Job
	doc := `{"properties": {"jobType": "Pipeline", "settings": {"default_compute": "` + ws + `/computes/cpu", "_source": "YAML.JOB"},
	  "inputs": {"n": {"jobInputType": "literal", "value": "40"}},
	  "outputs": {"scored": {"jobOutputType": "uri_folder"}},
	  "jobs": {
	    "make": {"type": "command", "command": "python make.py ${{inputs.n}} ${{outputs.files}}", "codeId": "` + ws + `/codes/c/versions/1",
	             "inputs": {"n": {"jobInputType": "literal", "value": "${{parent.inputs.n}}"}},
	             "outputs": {"files": {"jobOutputType": "uri_folder"}}},
	    "score": {"type": "parallel", "input_data": "${{inputs.files}}", "mini_batch_size": 5, "mini_batch_error_threshold": 1,
	              "resources": {"instanceCount": 2}, "max_concurrency_per_instance": 2,
	              "inputs": {"files": {"jobInputType": "uri_folder", "uri": "${{parent.jobs.make.outputs.files}}"}},
	              "outputs": {"scores": {"jobOutputType": "uri_folder", "uri": "${{parent.outputs.scored}}"}},
	              "task": {"type": "run_function", "code": "` + ws + `/codes/s/versions/1", "entry_script": "score.py",
	                       "program_arguments": "--model ${{inputs.files}}", "append_row_to": "${{outputs.scores}}"}},
	    "count": {"type": "command", "command": "wc -l ${{inputs.scores}}/parallel_run_step.txt",
	              "inputs": {"scores": {"jobInputType": "uri_folder", "uri": "${{parent.jobs.score.outputs.scores}}"}}}
	  }}}`
	if err := json.Unmarshal([]byte(doc), &j); err != nil {
		panic(err)
	}
	return j
}

func TestPreparePipeline(t *testing.T) {
	j := scoringPipeline()
	j.Name = "p"
	if err := PrepareJob(&j, "p"); err != nil {
		t.Fatal(err)
	}
	order, err := j.StepOrder()
	if err != nil || len(order) != 3 || order[0].Name != "make" || order[1].Name != "score" || order[2].Name != "count" {
		t.Fatalf("order %+v, %v", order, err)
	}
	score := j.Properties.Jobs["score"]
	if score.JobType != JobTypeParallel || !strings.Contains(score.Command, "CUMULUS_PARALLEL_DRIVER") || !strings.HasSuffix(score.Command, "--model ${{inputs.files}}") ||
		score.CodeID != ws+"/codes/s/versions/1" || *score.RetrySettings.MaxRetries != DefaultMaxRetries || *score.ErrorThreshold != -1 {
		t.Fatalf("the parallel step as prepared: %+v", score)
	}
	if step, out, ok := j.PipelineOutput("scored"); !ok || step != "score" || out != "scores" {
		t.Fatalf("pipeline output: %s %s %v", step, out, ok)
	}
	s := j.ParallelSettingsOf("score")
	if s.MiniBatchErrorThreshold != 1 || s.MaxRetries != 2 {
		t.Fatalf("settings %+v", s)
	}
	// The child jobs, bindings resolved.
	c, err := j.StepJob("score", "p_score", func(step, out string) (JobInput, error) {
		if step != "make" || out != "files" {
			t.Fatalf("resolves %s.%s", step, out)
		}
		return JobInput{JobInputType: "uri_folder", URI: BlobURIScheme + strings.Repeat("b", 64)}, nil
	})
	if err != nil || c.Properties.ComputeID != ws+"/computes/cpu" || c.Properties.ParentJobName != "p" || c.Properties.PipelineStep != "score" ||
		c.Properties.Inputs["files"].URI != BlobURIScheme+strings.Repeat("b", 64) || c.Properties.Outputs["scores"].URI != "" {
		t.Fatalf("child %+v, %v", c.Properties, err)
	}
	mk, _ := j.StepJob("make", "p_make", PlaceholderOutput)
	if in := mk.Properties.Inputs["n"]; in.JobInputType != "literal" || in.Value != "40" {
		t.Fatalf("a parent input bound: %+v", in)
	}
}

func TestPreparePipelineRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(j *Job)
		want string
	}{
		{"cycle", func(j *Job) {
			j.Properties.Jobs["make"].Inputs["back"] = JobInput{JobInputType: "uri_folder", URI: "${{parent.jobs.count.outputs.out}}"}
			j.Properties.Jobs["count"].Outputs = map[string]JobOutput{"out": {JobOutputType: "uri_folder"}}
		}, "cycle"},
		{"unknown step", func(j *Job) {
			j.Properties.Jobs["count"].Inputs["scores"] = JobInput{JobInputType: "uri_folder", URI: "${{parent.jobs.nope.outputs.x}}"}
		}, "step nope, which the pipeline does not have"},
		{"unknown output", func(j *Job) {
			j.Properties.Jobs["count"].Inputs["scores"] = JobInput{JobInputType: "uri_folder", URI: "${{parent.jobs.score.outputs.nope}}"}
		}, "has no such output (it has: scores)"},
		{"unknown parent input", func(j *Job) {
			j.Properties.Jobs["make"].Inputs["n"] = JobInput{JobInputType: "literal", Value: "${{parent.inputs.m}}"}
		}, "${{parent.inputs.m}}, which the pipeline's inputs do not have"},
		{"no compute", func(j *Job) { j.Properties.Settings.DefaultCompute = "" }, "names no compute"},
		{"input_data", func(j *Job) { j.Properties.Jobs["score"].InputData = "${{inputs.other}}" }, "input_data names input other"},
		{"append_row_to", func(j *Job) { j.Properties.Jobs["score"].Task.AppendRowTo = "${{outputs.x}}" }, "append_row_to names output x"},
		{"mini_batch_size", func(j *Job) { j.Properties.Jobs["score"].MiniBatchSize = "lots" }, "mini_batch_size \"lots\""},
		{"threshold", func(j *Job) { x := int32(-2); j.Properties.Jobs["score"].MiniBatchErrorThreshold = &x }, "-1 (ignore failures) or more"},
		{"binding in a command", func(j *Job) { j.Properties.Jobs["count"].Command = "echo ${{parent.inputs.n}}" }, "its command binds ${{parent"},
		{"unbound pipeline output", func(j *Job) { j.Properties.Outputs["extra"] = JobOutput{JobOutputType: "uri_folder"} }, "pipeline output extra is bound by no step"},
	} {
		j := scoringPipeline()
		c.mut(&j)
		err := PrepareJob(&j, "p")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A parallel job alone is not a pipeline's step.
	j := Job{Properties: JobProperties{JobType: "Command", ParallelSpec: &ParallelSpec{InputData: "${{inputs.x}}"}, Command: "x", ComputeID: "c"}}
	if err := PrepareJob(&j, "x"); err == nil || !strings.Contains(err.Error(), "belong to a pipeline's parallel steps") {
		t.Errorf("parallel settings on a command job: %v", err)
	}
}

func TestParallelPredefinedArguments(t *testing.T) {
	j := scoringPipeline()
	j.Properties.Jobs["score"].Task.ProgramArguments = "--model x --error_threshold 7 --allowed_failed_percent 30"
	if err := PrepareJob(&j, "p"); err != nil {
		t.Fatal(err)
	}
	s := j.ParallelSettingsOf("score")
	if s.ErrorThreshold != 7 || s.AllowedFailedPercent != 30 {
		t.Fatalf("settings %+v", s)
	}
	for in, want := range map[string]int64{"5": 5, "10kb": 10 << 10, "1 MB": 1 << 20} {
		n, _, err := ParseMiniBatchSize(in)
		if err != nil || n != want {
			t.Errorf("%q: %d %v", in, n, err)
		}
	}
}
