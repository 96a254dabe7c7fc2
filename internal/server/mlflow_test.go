package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// mlflowCall sends one request in MLflow's wire format, as the MLflow
// Python client's RestStore does: JSON bodies for POST, the query for GET,
// the tracking token as a bearer token.
func (h *harness) mlflowCall(token, method, op string, body any) (int, map[string]any) {
	h.t.Helper()
	var rd io.Reader
	u := h.url + "/mlflow/api/2.0/mlflow/" + op
	if method == "GET" {
		u += "?" + body.(string)
	} else {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, u, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		h.t.Fatalf("%s %s: %d, body not JSON: %v", method, op, res.StatusCode, err)
	}
	if res.StatusCode >= 400 && (out["error_code"] == nil || out["message"] == nil) {
		h.t.Errorf("%s %s: %d, not MLflow's error shape: %v", method, op, res.StatusCode, out)
	}
	return res.StatusCode, out
}

// TestMLflowTracking: a job's token logs metrics, params and tags to its
// own run the way mlflow.log_metric, log_metrics, log_param and set_tag
// do, reads them back as get_run does, and reaches no other job's run.
func TestMLflowTracking(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	for _, name := range []string{"a", "b"} {
		h.do("PUT", hWSPath+"/jobs/"+name, map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true",
			"computeId": computePath("cpu"), "experimentName": "exp"}}).want(t, 201)
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(h.dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	tok := map[string]string{}
	for _, name := range []string{"a", "b"} {
		j, err := store.GetJob(context.Background(), h.db.Q(), "/subscriptions/"+hSub+"/resourcegroups/"+hRG+"/providers/microsoft.machinelearningservices/workspaces/"+hWS, name)
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = server.TrackingToken(box, j.UID)
	}
	ok := func(status int, out map[string]any) map[string]any {
		t.Helper()
		if status != 200 {
			t.Fatalf("status %d: %v", status, out)
		}
		return out
	}
	refused := func(wantStatus int, wantCode string) func(int, map[string]any) {
		return func(status int, out map[string]any) {
			t.Helper()
			if status != wantStatus || out["error_code"] != wantCode {
				t.Errorf("got %d %v, want %d %s", status, out, wantStatus, wantCode)
			}
		}
	}
	a := tok["a"]
	// start_run(run_id=…) reads the run and marks it running.
	run := ok(h.mlflowCall(a, "GET", "runs/get", "run_uuid=a&run_id=a"))["run"].(map[string]any)
	if info := run["info"].(map[string]any); info["run_id"] != "a" || info["experiment_id"] != "exp" || info["status"] != "SCHEDULED" {
		t.Errorf("run info: %v", info)
	}
	ok(h.mlflowCall(a, "POST", "runs/update", map[string]any{"run_id": "a", "run_uuid": "a", "status": "RUNNING"}))
	// log_metric, with int64s as JSON numbers and as strings.
	for step, v := range []float64{0.5, 0.7, 0.9} {
		ok(h.mlflowCall(a, "POST", "runs/log-metric", map[string]any{"run_id": "a", "run_uuid": "a", "key": "val_acc", "value": v,
			"timestamp": 1_700_000_000_000 + step, "step": step}))
	}
	ok(h.mlflowCall(a, "POST", "runs/log-metric", map[string]any{"run_id": "a", "key": "loss", "value": "0.25", "timestamp": "1700000000000", "step": "3"}))
	ok(h.mlflowCall(a, "POST", "runs/log-parameter", map[string]any{"run_id": "a", "run_uuid": "a", "key": "lr", "value": "0.01"}))
	ok(h.mlflowCall(a, "POST", "runs/set-tag", map[string]any{"run_id": "a", "run_uuid": "a", "key": "stage", "value": "dev"}))
	ok(h.mlflowCall(a, "POST", "runs/log-batch", map[string]any{"run_id": "a",
		"metrics": []map[string]any{{"key": "loss", "value": 0.125, "timestamp": 1_700_000_000_100, "step": 4}},
		"params":  []map[string]any{{"key": "batch", "value": "32"}, {"key": "lr", "value": "0.01"}},
		"tags":    []map[string]any{{"key": "stage", "value": "prod"}}}))
	data := ok(h.mlflowCall(a, "GET", "runs/get", "run_id=a"))["run"].(map[string]any)["data"].(map[string]any)
	want := `{"metrics":[{"key":"loss","step":4,"timestamp":1700000000100,"value":0.125},{"key":"val_acc","step":2,"timestamp":1700000000002,"value":0.9}],` +
		`"params":[{"key":"batch","value":"32"},{"key":"lr","value":"0.01"}],"tags":[{"key":"stage","value":"prod"}]}`
	if got, _ := json.Marshal(data); string(got) != want {
		t.Errorf("run data:\n got %s\nwant %s", got, want)
	}

	// Refusals, in MLflow's error shape, that change nothing.
	refused(403, "PERMISSION_DENIED")(h.mlflowCall(a, "POST", "runs/log-metric", map[string]any{"run_id": "b", "key": "x", "value": 1}))
	refused(403, "PERMISSION_DENIED")(h.mlflowCall(tok["b"], "GET", "runs/get", "run_id=a"))
	forged := a[:len(a)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(a, "0")]
	refused(401, "UNAUTHENTICATED")(h.mlflowCall(forged, "GET", "runs/get", "run_id=a"))
	refused(401, "UNAUTHENTICATED")(h.mlflowCall(h.token, "GET", "runs/get", "run_id=a"))
	refused(401, "UNAUTHENTICATED")(h.mlflowCall("", "GET", "runs/get", "run_id=a"))
	refused(400, "INVALID_PARAMETER_VALUE")(h.mlflowCall(a, "POST", "runs/log-parameter", map[string]any{"run_id": "a", "key": "lr", "value": "0.1"}))
	refused(400, "INVALID_PARAMETER_VALUE")(h.mlflowCall(a, "POST", "runs/log-metric", map[string]any{"run_id": "a", "key": "x", "value": "NaN"}))
	refused(400, "INVALID_PARAMETER_VALUE")(h.mlflowCall(a, "POST", "runs/log-metric", map[string]any{"run_id": "a", "key": "", "value": 1}))
	refused(400, "INVALID_PARAMETER_VALUE")(h.mlflowCall(a, "POST", "runs/log-batch", map[string]any{"run_id": "a",
		"metrics": []map[string]any{{"key": "y", "value": 1}}, "params": []map[string]any{{"key": "lr", "value": "9"}}}))
	refused(404, "ENDPOINT_NOT_FOUND")(h.mlflowCall(a, "POST", "runs/delete", map[string]any{"run_id": "a"}))
	defer func(n int) { store.MaxMetricValues = n }(store.MaxMetricValues)
	store.MaxMetricValues = 5
	refused(400, "RESOURCE_LIMIT_EXCEEDED")(h.mlflowCall(a, "POST", "runs/log-batch", map[string]any{"run_id": "a",
		"metrics": []map[string]any{{"key": "z", "value": 1, "step": 1}, {"key": "z", "value": 2, "step": 2}}}))
	store.MaxMetricValues = 100_000

	// The owner reads the job's metrics through the API.
	var m api.JobMetrics
	if err := json.Unmarshal(h.do("GET", hWSPath+"/jobs/a/metrics", nil).want(t, 200).Body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Latest) != 2 || m.Latest[1].Name != "val_acc" || m.Latest[1].Value != 0.9 || len(m.History["val_acc"]) != 3 ||
		len(m.History["y"]) != 0 || m.Params["lr"] != "0.01" || m.Tags["stage"] != "prod" {
		t.Errorf("job metrics: %+v", m)
	}
	var j api.Job
	h.do("GET", hWSPath+"/jobs/a", nil).want(t, 200).json(t, &j)
	if j.Properties.Metrics["val_acc"] != 0.9 || j.Properties.Metrics["loss"] != 0.125 {
		t.Errorf("the job's latest metrics: %v", j.Properties.Metrics)
	}
	var one api.JobMetrics
	if err := json.Unmarshal(h.do("GET", hWSPath+"/jobs/a/metrics?name=loss", nil).want(t, 200).Body, &one); err != nil || len(one.History) != 1 {
		t.Errorf("one metric's history: %+v %v", one.History, err)
	}

	// An ended job's run takes no more values.
	h.do("POST", hWSPath+"/jobs/b/cancel", nil)
	refused(400, "INVALID_STATE")(h.mlflowCall(tok["b"], "POST", "runs/log-metric", map[string]any{"run_id": "b", "key": "x", "value": 1}))
}
