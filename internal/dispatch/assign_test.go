package dispatch

import (
	"reflect"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/distrib"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func TestExpandBindings(t *testing.T) {
	p := api.JobProperties{Inputs: map[string]api.JobInput{
		"lr":   {JobInputType: "literal", Value: "0.01"},
		"data": {JobInputType: "uri_folder", URI: "cumulus://blobs/abc"},
	}}
	cases := []struct{ cmd, want string }{
		{"python train.py", "python train.py"},
		{"python train.py --lr ${{inputs.lr}}", "python train.py --lr 0.01"},
		{"python train.py --data ${{ inputs.data }}", "python train.py --data ${AZUREML_INPUT_data}"},
		{"python train.py --out ${{outputs.model}}", "python train.py --out ${AZUREML_OUTPUT_model}"},
		{"a ${{inputs.undeclared}} b", "a ${AZUREML_INPUT_undeclared} b"},
		{"keep ${{search_space.x}} as is", "keep ${{search_space.x}} as is"},
		{"unclosed ${{inputs.lr", "unclosed ${{inputs.lr"},
		{"${{inputs.lr}}${{inputs.lr}}", "0.010.01"},
	}
	for _, c := range cases {
		if got := expandBindings(c.cmd, p); got != c.want {
			t.Errorf("expandBindings(%q) = %q, want %q", c.cmd, got, c.want)
		}
	}
}

func TestAssignment(t *testing.T) {
	j := job("j1", api.JobPreparing, 2, "n0", "n1")
	j.Doc.Properties = api.JobProperties{Command: "python train.py --lr ${{inputs.lr}}", ExperimentName: "exp",
		CodeID: "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/codes/c/versions/sha256abc",
		Image:  "python:3.12", EnvironmentVariables: map[string]string{"A": "1"},
		Inputs: map[string]api.JobInput{
			"lr":   {JobInputType: "literal", Value: "0.01"},
			"data": {JobInputType: "uri_folder", URI: "cumulus://blobs/d1"},
			"ext":  {JobInputType: "uri_file", URI: "https://example.com/x.csv"},
		},
		Outputs:      map[string]api.JobOutput{"model": {}, "logs": {}},
		Distribution: &api.Distribution{DistributionType: "PyTorch", ProcessCountPerInstance: 4},
	}
	n := store.Node{ID: "n1", VMSize: "Standard_NC12s_v3", GPUs: []int{0, 1, 2, 3}} // the size has 2 GPUs
	got := Assignment(j, n, Work{NodeIPs: []string{"10.0.0.1", "10.0.0.2"}, Checkpoint: true, Identity: true, DefaultClientID: "cid",
		TrackingToken: "cmlf_j1.tag"})
	want := agentapi.Assignment{UID: "j1", Name: "j1", Attempt: 2, Command: "python train.py --lr 0.01", CodeBlob: "sha256abc",
		Image: "python:3.12", Env: map[string]string{"A": "1", "AZUREML_INPUT_lr": "0.01", "AZUREML_INPUT_ext": "https://example.com/x.csv",
			"AZUREML_RUN_ID": "j1", "AZUREML_EXPERIMENT_NAME": "exp", "MLFLOW_TRACKING_TOKEN": "cmlf_j1.tag"},
		Inputs: map[string]string{"data": "d1"}, Grace: JobGrace, Outputs: []string{"logs", "model"}, GPUs: []int{0, 1},
		InstanceIndex: 1, NodeIPs: []string{"10.0.0.1", "10.0.0.2"}, Checkpoint: true, Identity: true, DefaultClientID: "cid",
		Distribution: &agentapi.Distribution{Type: "pytorch", ProcessesPerNode: 4, MasterPort: distrib.MasterPort("j1", 2, distrib.PortBlock(1, 4))}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Assignment =\n%+v\nwant\n%+v", got, want)
	}
	if j.Doc.Properties.EnvironmentVariables["AZUREML_RUN_ID"] != "" {
		t.Error("Assignment wrote into the job's environment")
	}
}

func TestJobGPUs(t *testing.T) {
	cases := []struct {
		size string
		gpus []int
		want []int
	}{
		{"Standard_NC12s_v3", []int{0, 1, 2, 3}, []int{0, 1}}, // more devices than the size: the size's count
		{"Standard_NC12s_v3", []int{0}, []int{0}},             // fewer: what the node has
		{"Standard_DS3_v2", nil, nil},
		{"Unknown_size", []int{0, 1}, []int{0, 1}}, // a size the catalog lacks: every device
	}
	for _, c := range cases {
		if got := jobGPUs(store.Node{VMSize: c.size, GPUs: c.gpus}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("jobGPUs(%s, %v) = %v, want %v", c.size, c.gpus, got, c.want)
		}
	}
}
