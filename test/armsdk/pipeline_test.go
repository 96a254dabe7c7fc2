package armsdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	ml "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/machinelearning/armmachinelearning/v4"
)

// TestPipelineJobWithSDK: the Azure SDK's PipelineJob (its jobs map of
// steps, one inline and one made from a registered component, its
// settings, typed inputs and outputs) and ComponentVersion round-trip
// through Cumulus as the SDK's types; the pipeline creates its steps'
// jobs, and canceling it through the SDK cancels them.
func TestPipelineJobWithSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	poller, err := e.computes.BeginCreateOrUpdate(ctx, rg, ws, "pipe-cpu", ml.ComputeResource{Location: to.Ptr(loc),
		Properties: &ml.AmlCompute{ComputeType: to.Ptr(ml.ComputeTypeAmlCompute), Properties: &ml.AmlComputeProperties{
			VMSize: to.Ptr("STANDARD_D2_V2"), ScaleSettings: &ml.ScaleSettings{MaxNodeCount: to.Ptr[int32](2)}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := poller.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	components := e.factory.NewComponentVersionsClient()
	spec := map[string]any{"type": "command", "command": "python report.py ${{inputs.scores}} ${{inputs.title}}",
		"environment": "image:python:3.12", "inputs": map[string]any{"scores": map[string]any{"type": "uri_folder"},
			"title": map[string]any{"type": "string", "default": "weekly"}}}
	comp, err := components.CreateOrUpdate(ctx, rg, ws, "report", "3", ml.ComponentVersion{Properties: &ml.ComponentVersionProperties{
		ComponentSpec: spec, Description: to.Ptr("the report step"), IsAnonymous: to.Ptr(false)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := components.Get(ctx, rg, ws, "report", "3", nil); err != nil || got.Properties.ComponentSpec.(map[string]any)["command"] != spec["command"] {
		t.Fatalf("component: %+v %v", got, err)
	}

	job := ml.JobBase{Properties: &ml.PipelineJob{
		JobType:     to.Ptr(ml.JobTypePipeline),
		DisplayName: to.Ptr("sdk pipeline"),
		Settings:    map[string]any{"default_compute": *c.ID, "continue_on_step_failure": true},
		Inputs: map[string]ml.JobInputClassification{
			"lr": &ml.LiteralJobInput{JobInputType: to.Ptr(ml.JobInputTypeLiteral), Value: to.Ptr("0.01")}},
		Outputs: map[string]ml.JobOutputClassification{
			"scored": &ml.URIFolderJobOutput{JobOutputType: to.Ptr(ml.JobOutputTypeURIFolder)}},
		Jobs: map[string]any{
			"train": map[string]any{"type": "command", "command": "python train.py --lr ${{inputs.lr}} --out ${{outputs.model}}",
				"environmentId": "image:python:3.12",
				"inputs":        map[string]any{"lr": map[string]any{"jobInputType": "literal", "value": "${{parent.inputs.lr}}"}},
				"outputs":       map[string]any{"model": map[string]any{"jobOutputType": "uri_folder", "uri": "${{parent.outputs.scored}}"}}},
			"report": map[string]any{"componentId": *comp.ID,
				"inputs": map[string]any{"scores": map[string]any{"jobInputType": "uri_folder", "uri": "${{parent.jobs.train.outputs.model}}"}}},
		},
	}}
	resp, err := e.jobs.CreateOrUpdate(ctx, rg, ws, "sdk-pipeline", job, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.jobs.Get(ctx, rg, ws, "sdk-pipeline", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []ml.JobBase{resp.JobBase, got.JobBase} {
		pj, ok := r.Properties.(*ml.PipelineJob)
		if !ok {
			t.Fatalf("properties are %T, want *PipelineJob", r.Properties)
		}
		lr, ok := pj.Inputs["lr"].(*ml.LiteralJobInput)
		if !ok || *lr.Value != "0.01" {
			t.Errorf("inputs %#v", pj.Inputs)
		}
		if _, ok := pj.Outputs["scored"].(*ml.URIFolderJobOutput); !ok {
			t.Errorf("outputs %#v", pj.Outputs)
		}
		settings, _ := pj.Settings.(map[string]any)
		if settings["continue_on_step_failure"] != true || settings["default_compute"] != *c.ID {
			t.Errorf("settings %#v", pj.Settings)
		}
		train, _ := pj.Jobs["train"].(map[string]any)
		report, _ := pj.Jobs["report"].(map[string]any)
		if train["command"] != "python train.py --lr ${{inputs.lr}} --out ${{outputs.model}}" || train["type"] != "command" {
			t.Errorf("step train %#v", train)
		}
		if report["componentId"] != *comp.ID || report["command"] != spec["command"] {
			t.Errorf("step report, from its component: %#v", report)
		}
		in, _ := report["inputs"].(map[string]any)
		title, _ := in["title"].(map[string]any)
		if title["value"] != "weekly" {
			t.Errorf("the component's default input: %#v", in)
		}
	}
	// The same document again is the same job (only metadata may change).
	if _, err := e.jobs.CreateOrUpdate(ctx, rg, ws, "sdk-pipeline", job, nil); err != nil {
		t.Fatalf("re-submit: %v", err)
	}
	// The controller creates the first step's job; canceling the pipeline
	// cancels it, then the pipeline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.jobs.Get(ctx, rg, ws, "sdk-pipeline_train", nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pipeline's first step was not created")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel, err := e.jobs.BeginCancel(ctx, rg, ws, "sdk-pipeline", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cancel.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := e.jobs.Get(ctx, rg, ws, "sdk-pipeline", nil)
		if err != nil {
			t.Fatal(err)
		}
		if st := *p.Properties.(*ml.PipelineJob).Status; st == ml.JobStatusCanceled {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pipeline %s after cancel", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	step, err := e.jobs.Get(ctx, rg, ws, "sdk-pipeline_train", nil)
	if err != nil || *step.Properties.(*ml.CommandJob).Status != ml.JobStatusCanceled {
		t.Fatalf("the step after the pipeline's cancel: %+v %v", step, err)
	}
}
