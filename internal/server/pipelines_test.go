package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A parallel step's mini-batches go only to the nodes that run it: another
// node is told to stop and gets none, a user's token is refused, and a
// parallel job cannot be submitted outside a pipeline.
func TestParallelExchangeOnlyForItsNodes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	h.create("cpu", computeBody())
	h.do("PUT", hWSPath+"/jobs/alone", map[string]any{"properties": map[string]any{"jobType": "Parallel", "computeId": computePath("cpu"),
		"input_data": "${{inputs.x}}", "task": map[string]any{"entry_script": "s.py"}}}).want(t, 400)
	mine := hardRegisterNode(t, h.url, h.db, "n1")
	other := hardRegisterNode(t, h.url, h.db, "n2")
	two := int32(2)
	j := store.Job{UID: "pj", Parent: hWSPath, Compute: computePath("cpu"), Created: time.Unix(1, 0), Attempt: 1, Nodes: []string{"n1"}}
	j.Doc.Name = "p_score"
	j.Doc.Properties = api.JobProperties{JobType: api.JobTypeParallel, Status: api.JobRunning, ComputeID: computePath("cpu"),
		Inputs:       map[string]api.JobInput{"x": {JobInputType: "uri_folder", URI: api.BlobURIScheme + strings.Repeat("a", 64)}},
		ParallelSpec: &api.ParallelSpec{InputData: "${{inputs.x}}", MiniBatchErrorThreshold: &two, Task: &api.ParallelTask{EntryScript: "s.py"}},
		Attempts:     []api.Attempt{{Number: 1, Nodes: []string{"n1"}}}}
	if err := store.InsertJob(ctx, h.db.W(), &j); err != nil {
		t.Fatal(err)
	}
	ask := func(token string) *resp {
		t.Helper()
		return h.raw("POST", agentapi.Prefix+"/jobs/pj/parallel", agentapi.ParallelRequest{Attempt: 1, Want: 2,
			Plan: &agentapi.ParallelPlan{Items: []int{1, 1, 1}, Digest: "d"}}, "Authorization", "Bearer "+token)
	}
	ask(h.token).want(t, 401)
	var got agentapi.ParallelResponse
	if err := json.Unmarshal(ask(other).want(t, 200).Body, &got); err != nil || len(got.Batches) != 0 || got.Failed == "" {
		t.Fatalf("another node: %+v %v", got, err)
	}
	if err := json.Unmarshal(ask(mine).want(t, 200).Body, &got); err != nil || len(got.Batches) != 2 {
		t.Fatalf("the step's node: %+v %v", got, err)
	}
	// Its progress shows on the job.
	var v api.Job
	if err := json.Unmarshal(h.do("GET", hWSPath+"/jobs/p_score", nil).want(t, 200).Body, &v); err != nil {
		t.Fatal(err)
	}
	if st := v.Properties.Parallel; st == nil || st.MiniBatches != 3 || st.Running != 2 || st.Pending != 1 {
		t.Fatalf("progress %+v", v.Properties.Parallel)
	}
}
