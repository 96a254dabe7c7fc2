package server

// The subset of MLflow's tracking REST API (/api/2.0/mlflow/…) that
// mlflow.log_metric, log_metrics, log_param, log_params, set_tag,
// set_tags, get_run, and the resuming of the run named by MLFLOW_RUN_ID
// (start_run → runs/get, runs/update; end_run → runs/update) call: the
// routes and bodies of the MLflow Python client's RestStore and fluent
// start_run of the 2.x releases (checked against its source); int64s are
// taken as JSON numbers or strings. Fields a client adds that Cumulus
// does not use (3.x's model_id, dataset_name, dataset_digest) are ignored.
//
// A job's calls carry its tracking token (MLFLOW_TRACKING_TOKEN, see
// TrackingToken) and reach only its own run, whose id is the job's name,
// as in Azure ML. Run status is the job's: runs/update is answered but
// changes nothing, since the job's exit decides how it ended.

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

const (
	mlflowPrefix = agentapi.TrackingPath + "/"
	mlflowAPI    = agentapi.TrackingPath + "/api/2.0/mlflow/"

	// trackingTokenPrefix begins every job tracking token.
	trackingTokenPrefix = "cmlf_"

	// MLflow's own limits on one request (mlflow/utils/validation.py).
	maxBatchMetrics  = 1000
	maxBatchParams   = 100
	maxBatchTags     = 100
	maxMetricName    = 250
	maxParamValueLen = 6000
	maxTagValueLen   = 8000
)

// mlflowError is an error in MLflow's wire shape.
type mlflowError struct {
	Status  int    `json:"-"`
	Code    string `json:"error_code"`
	Message string `json:"message"`
}

func (e *mlflowError) Error() string { return e.Code + ": " + e.Message }

func mlflowInvalid(format string, args ...any) *mlflowError {
	return &mlflowError{Status: http.StatusBadRequest, Code: "INVALID_PARAMETER_VALUE", Message: fmt.Sprintf(format, args...)}
}

// TrackingToken is job uid's MLflow bearer token: only the holder of the
// server's key makes it, and it names the job.
func TrackingToken(box *secret.Box, uid string) string {
	return trackingTokenPrefix + uid + "." + box.Tag("mlflow-run/"+uid)
}

func (s *Server) trackingToken(uid string) string { return TrackingToken(s.box, uid) }

// trackingJob is the uid of the job whose tracking token the request
// carries.
func (s *Server) trackingJob(r *http.Request) (string, error) {
	unauth := func(msg string) error {
		return &mlflowError{Status: http.StatusUnauthorized, Code: "UNAUTHENTICATED", Message: msg}
	}
	if s.box == nil {
		return "", unauth("this server issues no tracking tokens")
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", unauth("send the job's MLFLOW_TRACKING_TOKEN as 'Authorization: Bearer <token>'")
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(tok), trackingTokenPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 {
		return "", unauth("the bearer token is not a job tracking token")
	}
	uid := rest[:i]
	if subtle.ConstantTimeCompare([]byte(s.trackingToken(uid)), []byte(trackingTokenPrefix+rest)) != 1 {
		return "", unauth("the tracking token is not valid")
	}
	return uid, nil
}

// serveMLflow answers the MLflow routes in MLflow's error shape.
func (s *Server) serveMLflow(w http.ResponseWriter, r *http.Request) {
	out, err := s.mlflow(r)
	if err != nil {
		var me *mlflowError
		if !errors.As(err, &me) {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status < 500 {
				me = &mlflowError{Status: ae.Status, Code: "BAD_REQUEST", Message: ae.Message}
			} else {
				s.log.Error("mlflow request failed", "path", r.URL.Path, "err", err)
				me = &mlflowError{Status: http.StatusInternalServerError, Code: "INTERNAL_ERROR", Message: "internal error"}
			}
		}
		writeJSON(w, me.Status, me)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// mlflowRequest is the union of the fields of the requests served.
type mlflowRequest struct {
	RunID     string          `json:"run_id"`
	RunUUID   string          `json:"run_uuid"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Timestamp json.RawMessage `json:"timestamp"`
	Step      json.RawMessage `json:"step"`
	Metrics   []mlflowMetric  `json:"metrics"`
	Params    []mlflowKV      `json:"params"`
	Tags      []mlflowKV      `json:"tags"`
}

type mlflowMetric struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Timestamp json.RawMessage `json:"timestamp"`
	Step      json.RawMessage `json:"step"`
}

type mlflowKV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (s *Server) mlflow(r *http.Request) (any, error) {
	op, ok := strings.CutPrefix(r.URL.Path, mlflowAPI)
	if !ok {
		return nil, &mlflowError{Status: http.StatusNotFound, Code: "ENDPOINT_NOT_FOUND", Message: "no MLflow API at " + r.URL.Path}
	}
	uid, err := s.trackingJob(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	j, err := store.GetJobByUID(ctx, s.db.Q(), uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &mlflowError{Status: http.StatusUnauthorized, Code: "UNAUTHENTICATED", Message: "the job of this tracking token no longer exists"}
	}
	if err != nil {
		return nil, err
	}
	get := func() (mlflowRequest, error) {
		q := r.URL.Query()
		return mlflowRequest{RunID: q.Get("run_id"), RunUUID: q.Get("run_uuid")}, nil
	}
	post := func() (mlflowRequest, error) {
		var req mlflowRequest
		if err := decode(r, &req); err != nil {
			return req, &mlflowError{Status: http.StatusBadRequest, Code: "MALFORMED_REQUEST", Message: err.Error()}
		}
		return req, nil
	}
	method := map[string]string{"runs/get": "GET", "experiments/get": "GET", "experiments/get-by-name": "GET"}[op]
	if method == "" {
		method = "POST"
	}
	if r.Method != method {
		return nil, &mlflowError{Status: http.StatusMethodNotAllowed, Code: "BAD_REQUEST", Message: op + " takes " + method}
	}
	switch op {
	case "experiments/get", "experiments/get-by-name":
		return map[string]any{"experiment": experimentOf(j)}, nil
	}
	read := get
	if method == "POST" {
		read = post
	}
	req, err := read()
	if err != nil {
		return nil, err
	}
	if err := ownRun(j, req); err != nil {
		return nil, err
	}
	if method == "POST" && op != "runs/update" && api.JobTerminal(j.Doc.Properties.Status) {
		return nil, &mlflowError{Status: http.StatusBadRequest, Code: "INVALID_STATE",
			Message: "run " + j.Doc.Name + " has ended (" + j.Doc.Properties.Status + "); it takes no more metrics, params or tags"}
	}
	now := s.clock.Now()
	switch op {
	case "runs/get":
		return s.mlflowRun(ctx, j)
	case "runs/update":
		return map[string]any{"run_info": runInfo(j)}, nil
	case "runs/log-metric":
		m, err := metricOf(mlflowMetric{Key: req.Key, Value: req.Value, Timestamp: req.Timestamp, Step: req.Step}, now)
		if err != nil {
			return nil, err
		}
		return struct{}{}, limitError(s.db.Tx(ctx, func(q store.Querier) error {
			return s.boundRunData(ctx, q, j, func() error { return store.PutMetrics(ctx, q, j.UID, []store.Metric{m}) })
		}))
	case "runs/log-parameter":
		return struct{}{}, s.logRun(ctx, j, nil, []mlflowKV{{req.Key, valueString(req.Value)}}, nil, now)
	case "runs/set-tag":
		return struct{}{}, s.logRun(ctx, j, nil, nil, []mlflowKV{{req.Key, valueString(req.Value)}}, now)
	case "runs/log-batch":
		if len(req.Metrics) > maxBatchMetrics || len(req.Params) > maxBatchParams || len(req.Tags) > maxBatchTags {
			return nil, mlflowInvalid("a batch holds at most %d metrics, %d params and %d tags", maxBatchMetrics, maxBatchParams, maxBatchTags)
		}
		return struct{}{}, s.logRun(ctx, j, req.Metrics, req.Params, req.Tags, now)
	}
	return nil, &mlflowError{Status: http.StatusNotFound, Code: "ENDPOINT_NOT_FOUND",
		Message: "Cumulus serves runs/get, runs/update, runs/log-metric, runs/log-parameter, runs/set-tag and runs/log-batch of MLflow's API, not " + op}
}

// ownRun refuses a request for a run other than the job's own.
func ownRun(j store.Job, req mlflowRequest) error {
	id := req.RunID
	if id == "" {
		id = req.RunUUID
	}
	if id == "" {
		return mlflowInvalid("the request names no run_id")
	}
	if id != j.Doc.Name {
		return &mlflowError{Status: http.StatusForbidden, Code: "PERMISSION_DENIED",
			Message: "this tracking token is job " + j.Doc.Name + "'s and reaches only its run, not " + id}
	}
	return nil
}

// logRun stores metrics, params and tags in one transaction: all or none.
func (s *Server) logRun(ctx context.Context, j store.Job, metrics []mlflowMetric, params, tags []mlflowKV, now time.Time) error {
	ms := make([]store.Metric, 0, len(metrics))
	for _, m := range metrics {
		v, err := metricOf(m, now)
		if err != nil {
			return err
		}
		ms = append(ms, v)
	}
	ps, err := runValues("param", params, maxParamValueLen)
	if err != nil {
		return err
	}
	ts, err := runValues("tag", tags, maxTagValueLen)
	if err != nil {
		return err
	}
	err = s.db.Tx(ctx, func(q store.Querier) error {
		return s.boundRunData(ctx, q, j, func() error {
			return errors.Join(store.PutMetrics(ctx, q, j.UID, ms), store.PutParams(ctx, q, j.UID, ps), store.PutTags(ctx, q, j.UID, ts))
		})
	})
	if errors.Is(err, store.ErrParamChanged) {
		return mlflowInvalid("%s (params cannot change once logged; log a new param or a tag)", err.Error())
	}
	return limitError(err)
}

// runDataCheckEvery is how much run data a job adds between two checks of
// its workspace's total: a workspace at its limit takes at most this much
// more from each of its running jobs.
const runDataCheckEvery = 256 << 10

// boundRunData runs put, which stores run data of job in q's transaction,
// and refuses it (store.ErrRunLimit) when the job's workspace keeps more
// than Limits.WorkspaceRunData: checked when the job's own run data
// crosses a multiple of runDataCheckEvery, so that a metric logged at
// every step costs no sum over the workspace.
func (s *Server) boundRunData(ctx context.Context, q store.Querier, j store.Job, put func() error) error {
	before, err := store.RunBytes(ctx, q, j.UID)
	if err != nil {
		return err
	}
	if err := put(); err != nil {
		return err
	}
	after, err := store.RunBytes(ctx, q, j.UID)
	if err != nil || after/runDataCheckEvery == before/runDataCheckEvery {
		return err
	}
	total, err := store.WorkspaceRunBytes(ctx, q, j.Parent)
	if err != nil {
		return err
	}
	if limit := s.cfg.Limits.WorkspaceRunData; total > limit {
		return fmt.Errorf("%w: the jobs of workspace %s keep %d bytes of params, tags and metric values, more than its limit of %d (cumulus serve --max-workspace-run-data); delete old jobs",
			store.ErrRunLimit, j.Parent[strings.LastIndex(j.Parent, "/")+1:], total, limit)
	}
	return nil
}

// limitError is MLflow's answer to a job past what it or its workspace
// may keep.
func limitError(err error) error {
	switch {
	case errors.Is(err, store.ErrMetricLimit):
		return &mlflowError{Status: http.StatusBadRequest, Code: "RESOURCE_LIMIT_EXCEEDED", Message: err.Error() + "; log less often"}
	case errors.Is(err, store.ErrRunLimit):
		return &mlflowError{Status: http.StatusBadRequest, Code: "RESOURCE_LIMIT_EXCEEDED", Message: err.Error()}
	}
	return err
}

func runValues(what string, kvs []mlflowKV, maxValue int) ([]store.RunValue, error) {
	out := make([]store.RunValue, 0, len(kvs))
	for _, kv := range kvs {
		if err := checkName(what, kv.Key); err != nil {
			return nil, err
		}
		if len(kv.Value) > maxValue {
			return nil, mlflowInvalid("the value of %s %q is %d bytes; at most %d", what, kv.Key, len(kv.Value), maxValue)
		}
		out = append(out, store.RunValue{Name: kv.Key, Value: kv.Value})
	}
	return out, nil
}

// checkName refuses an empty, overlong or unprintable metric, param or
// tag name.
func checkName(what, name string) error {
	if name == "" || len(name) > maxMetricName {
		return mlflowInvalid("a %s name must have 1 to %d characters", what, maxMetricName)
	}
	if strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return mlflowInvalid("%s name %q has an unprintable character", what, name)
	}
	return nil
}

// metricOf reads one metric in MLflow's JSON: numbers may come as JSON
// numbers or as strings (protobuf's JSON for int64 and NaN); a missing
// timestamp is now, a missing step 0.
func metricOf(m mlflowMetric, now time.Time) (store.Metric, error) {
	if err := checkName("metric", m.Key); err != nil {
		return store.Metric{}, err
	}
	if len(m.Value) == 0 || string(m.Value) == "null" {
		return store.Metric{}, mlflowInvalid("metric %q has no value", m.Key)
	}
	v, err := strconv.ParseFloat(unquote(m.Value), 64)
	if err != nil {
		return store.Metric{}, mlflowInvalid("the value of metric %q is not a number: %s", m.Key, m.Value)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return store.Metric{}, mlflowInvalid("the value of metric %q is %v; Cumulus keeps finite values only", m.Key, v)
	}
	out := store.Metric{Name: m.Key, Value: v, Time: now}
	if len(m.Timestamp) > 0 && string(m.Timestamp) != "null" {
		ms, err := strconv.ParseInt(unquote(m.Timestamp), 10, 64)
		if err != nil {
			return out, mlflowInvalid("the timestamp of metric %q is not milliseconds since 1970: %s", m.Key, m.Timestamp)
		}
		out.Time = time.UnixMilli(ms)
	}
	if len(m.Step) > 0 && string(m.Step) != "null" {
		step, err := strconv.ParseInt(unquote(m.Step), 10, 64)
		if err != nil {
			return out, mlflowInvalid("the step of metric %q is not an integer: %s", m.Key, m.Step)
		}
		out.Step = step
	}
	return out, nil
}

func unquote(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// valueString is a param's or tag's value: MLflow sends strings, but a
// hand-written call may send a number.
func valueString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return unquote(raw)
}

// experimentID is the MLflow experiment of a job: its experiment name
// ("Default" when it has none), which is also its id.
func experimentID(j store.Job) string {
	if e := j.Doc.Properties.ExperimentName; e != "" {
		return e
	}
	return "Default"
}

func experimentOf(j store.Job) map[string]any {
	return map[string]any{"experiment_id": experimentID(j), "name": experimentID(j), "artifact_location": "", "lifecycle_stage": "active"}
}

// runStatus is MLflow's RunStatus of a job status.
func runStatus(status string) string {
	switch status {
	case api.JobRunning, api.JobFinalizing:
		return "RUNNING"
	case api.JobCompleted:
		return "FINISHED"
	case api.JobFailed:
		return "FAILED"
	case api.JobCanceled, api.JobCancelRequested:
		return "KILLED"
	}
	return "SCHEDULED"
}

func runInfo(j store.Job) map[string]any {
	p := j.Doc.Properties
	info := map[string]any{"run_id": j.Doc.Name, "run_uuid": j.Doc.Name, "run_name": j.Doc.Name, "experiment_id": experimentID(j),
		"status": runStatus(p.Status), "start_time": j.Created.UnixMilli(), "artifact_uri": "", "lifecycle_stage": "active"}
	if p.DisplayName != "" {
		info["run_name"] = p.DisplayName
	}
	if sd := j.Doc.SystemData; sd != nil {
		info["user_id"] = sd.CreatedBy
	}
	if p.StartTime != nil {
		info["start_time"] = p.StartTime.UnixMilli()
	}
	if p.EndTime != nil {
		info["end_time"] = p.EndTime.UnixMilli()
	}
	return info
}

// mlflowRun is runs/get's answer: the run's info and its latest metrics,
// params and tags.
func (s *Server) mlflowRun(ctx context.Context, j store.Job) (any, error) {
	latest, err := store.LatestMetrics(ctx, s.db.Q(), j.UID)
	if err != nil {
		return nil, err
	}
	params, tags, err := store.RunData(ctx, s.db.Q(), j.UID)
	if err != nil {
		return nil, err
	}
	type kv = mlflowKV
	type metric struct {
		Key       string  `json:"key"`
		Value     float64 `json:"value"`
		Timestamp int64   `json:"timestamp"`
		Step      int64   `json:"step"`
	}
	data := struct {
		Metrics []metric `json:"metrics"`
		Params  []kv     `json:"params"`
		Tags    []kv     `json:"tags"`
	}{Metrics: []metric{}, Params: []kv{}, Tags: []kv{}}
	for _, m := range latest {
		data.Metrics = append(data.Metrics, metric{m.Name, m.Value, m.Time.UnixMilli(), m.Step})
	}
	for _, p := range params {
		data.Params = append(data.Params, kv{p.Name, p.Value})
	}
	for _, t := range tags {
		data.Tags = append(data.Tags, kv{t.Name, t.Value})
	}
	return map[string]any{"run": map[string]any{"info": runInfo(j), "data": data, "inputs": map[string]any{}}}, nil
}

// jobMetrics answers GET …/jobs/{name}/metrics (a Cumulus extension): the
// latest value of each metric, every value of the metrics named by
// ?name= (repeatable; none: all), and the params and tags.
func (s *Server) jobMetrics(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	out, err := JobMetricsOf(r.Context(), s.db.Q(), j.UID, r.URL.Query()["name"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// JobMetricsOf reads what job uid logged: the latest of each metric, the
// history of the metrics named (none: all), params and tags.
func JobMetricsOf(ctx context.Context, q store.Querier, uid string, names []string) (api.JobMetrics, error) {
	out := api.JobMetrics{Latest: []api.MetricValue{}}
	latest, err := store.LatestMetrics(ctx, q, uid)
	if err != nil {
		return out, err
	}
	for _, m := range latest {
		out.Latest = append(out.Latest, metricValue(m))
	}
	all, err := store.Metrics(ctx, q, uid, "")
	if err != nil {
		return out, err
	}
	out.History = map[string][]api.MetricValue{}
	for _, m := range all {
		if len(names) == 0 || slices.Contains(names, m.Name) {
			out.History[m.Name] = append(out.History[m.Name], metricValue(m))
		}
	}
	params, tags, err := store.RunData(ctx, q, uid)
	if err != nil {
		return out, err
	}
	for _, v := range params {
		if out.Params == nil {
			out.Params = map[string]string{}
		}
		out.Params[v.Name] = v.Value
	}
	for _, v := range tags {
		if out.Tags == nil {
			out.Tags = map[string]string{}
		}
		out.Tags[v.Name] = v.Value
	}
	return out, nil
}

func metricValue(m store.Metric) api.MetricValue {
	return api.MetricValue{Name: m.Name, Value: m.Value, Step: m.Step, Timestamp: m.Time.UTC()}
}

// latestMetrics is the latest value of each metric job uid logged; nil
// for none.
func (s *Server) latestMetrics(ctx context.Context, uid string) (map[string]float64, error) {
	latest, err := store.LatestMetrics(ctx, s.db.Q(), uid)
	if err != nil || len(latest) == 0 {
		return nil, err
	}
	out := make(map[string]float64, len(latest))
	for _, m := range latest {
		out[m.Name] = m.Value
	}
	return out, nil
}
