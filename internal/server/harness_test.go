package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/syncbuf"
)

// The harness serves the real API (server.New over a real SQLite store in
// t.TempDir(), a real secret box, a real controller.Operations) through
// httptest.NewServer. Nothing is mocked.

const (
	hSub      = "sub1"
	hRG       = "rg1"
	hWS       = "ws1"
	hLoc      = "westus2"
	hVersion  = "2024-04-01"
	hPageSize = 3
)

var (
	hWSPath  = "/subscriptions/" + hSub + "/resourceGroups/" + hRG + "/providers/Microsoft.MachineLearningServices/workspaces/" + hWS
	hLocPath = "/subscriptions/" + hSub + "/providers/Microsoft.MachineLearningServices/locations/" + hLoc
)

func computePath(name string) string { return hWSPath + "/computes/" + name }

type harness struct {
	t      *testing.T
	ts     *httptest.Server
	url    string
	token  string
	db     *store.DB
	srv    *server.Server
	dir    string
	ops    *controller.Operations
	logs   *syncbuf.Buffer
	mu     sync.Mutex
	failed []string // 5xx answers seen
	m      *metrics.Metrics
}

type harnessOpts struct {
	manualOps bool            // do not run the operations loop; tests call RunOnce
	clusters  server.Notifier // told when jobs, nodes or quotas change; nil for none
	clock     clock.Clock     // the server's clock; nil: the real one
	config    func(*server.Config)
	metrics   bool // serve /metrics, fed by the store
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ops := &controller.Operations{DB: db, Clock: clock.Real{}, Log: log, Resync: 50 * time.Millisecond}
	ops.Init()
	cfg := server.Config{
		Defaults:  server.Defaults{Subscription: hSub, ResourceGroup: hRG, Location: hLoc, Workspace: hWS},
		Quotas:    server.Quotas{FamilyCores: 400, TotalCores: 1000, LowPriorityCores: 500},
		Locations: []string{hLoc, "eastus"},
		PageSize:  hPageSize,
		DataDir:   dir,
	}
	if o.config != nil {
		o.config(&cfg)
	}
	var clk clock.Clock = clock.Real{}
	if o.clock != nil {
		clk = o.clock
	}
	var srv *server.Server
	var m *metrics.Metrics
	if o.metrics {
		m = metrics.New(metrics.Options{DB: db, Log: log,
			Limits: func(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error) {
				return srv.Limits(ctx, q, sub, loc)
			}})
		db.SetObserver(m)
	}
	srv = server.New(cfg, server.Deps{DB: db, Box: box, Clock: clk, Log: log, Ops: ops, Clusters: o.clusters, Metrics: m})
	if err := srv.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := server.EnsureAdminToken(ctx, db, time.Now())
	if err != nil || tok == "" {
		t.Fatalf("admin token %q: %v", tok, err)
	}
	h := &harness{t: t, db: db, dir: dir, ops: ops, token: tok, logs: logs, srv: srv, m: m}
	h.ts = httptest.NewServer(srv)
	h.url = h.ts.URL
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if o.manualOps {
		close(done)
	} else {
		go func() { defer close(done); ops.Run(runCtx) }()
	}
	t.Cleanup(func() {
		h.ts.Close()
		cancel()
		<-done
		db.Close()
		if len(h.failed) > 0 {
			t.Errorf("the server answered 5xx: %v", h.failed)
		}
		if strings.Contains(logs.String(), "panic") {
			t.Errorf("the server logged a panic:\n%s", logs.String())
		}
	})
	return h
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// errCode returns the ARM error code of an error answer.
func (r *resp) errCode(t *testing.T) string {
	t.Helper()
	var e api.ErrorResponse
	r.json(t, &e)
	return e.Error.Code
}

func (r *resp) compute(t *testing.T) api.Compute {
	t.Helper()
	var c api.Compute
	r.json(t, &c)
	return c
}

// withVersion adds api-version unless the path already has one.
func withVersion(p string) string {
	if strings.Contains(p, "api-version=") {
		return p
	}
	if strings.Contains(p, "/providers/"+api.ManagedIdentityProvider+"/") {
		return at(p, api.ManagedIdentityAPIVersion)
	}
	if strings.Contains(p, "?") {
		return p + "&api-version=" + hVersion
	}
	return p + "?api-version=" + hVersion
}

// do calls the API with the admin token and the api-version.
func (h *harness) do(method, path string, body any, hdr ...string) *resp {
	h.t.Helper()
	return h.raw(method, withVersion(path), body, append([]string{"Authorization", "Bearer " + h.token}, hdr...)...)
}

// raw calls the server as given. Every error answer is checked for the
// ARM error shape and the x-ms-error-code header.
func (h *harness) raw(method, path string, body any, hdr ...string) *resp {
	h.t.Helper()
	u := path
	if !strings.HasPrefix(u, "http") {
		u = h.url + path
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &resp{Status: res.StatusCode, Header: res.Header, Body: data}
	if r.Status >= 500 {
		h.mu.Lock()
		h.failed = append(h.failed, method+" "+path+": "+string(data))
		h.mu.Unlock()
	}
	if r.Status >= 400 {
		checkErrorShape(h.t, method+" "+path, r)
	}
	return r
}

// checkErrorShape asserts {"error":{"code","message"}} and x-ms-error-code.
func checkErrorShape(t testing.TB, what string, r *resp) {
	t.Helper()
	var body struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Error == nil || body.Error.Code == nil || body.Error.Message == nil ||
		*body.Error.Code == "" || *body.Error.Message == "" {
		t.Errorf("%s: %d body is not an ARM error: %q (%v)", what, r.Status, r.Body, err)
		return
	}
	if got := r.Header.Get("x-ms-error-code"); got != *body.Error.Code {
		t.Errorf("%s: x-ms-error-code = %q, body code %q", what, got, *body.Error.Code)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: error Content-Type = %q", what, ct)
	}
}

// want asserts a status (and, for errors, the ARM code).
func (r *resp) want(t *testing.T, status int, code ...string) *resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if len(code) > 0 {
		if got := r.errCode(t); got != code[0] {
			t.Fatalf("code %q, want %q; body %s", got, code[0], r.Body)
		}
	}
	return r
}

// computeBody is a valid PUT body.
func computeBody(mut ...func(m map[string]any)) map[string]any {
	props := map[string]any{
		"vmSize":     "Standard_DS2_v2",
		"vmPriority": "Dedicated",
		"scaleSettings": map[string]any{
			"minNodeCount": 0, "maxNodeCount": 2, "nodeIdleTimeBeforeScaleDown": "PT5M",
		},
	}
	m := map[string]any{
		"properties": map[string]any{"computeType": "AmlCompute", "description": "test cluster", "properties": props},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func inner(m map[string]any) map[string]any {
	return m["properties"].(map[string]any)["properties"].(map[string]any)
}

// waitOp polls an Azure-AsyncOperation URL until it leaves InProgress.
func (h *harness) waitOp(link string) api.OperationStatus {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st api.OperationStatus
		h.do("GET", link, nil).want(h.t, 200).json(h.t, &st)
		if st.Status != api.OpInProgress {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("operation %s still InProgress after 10s", link)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a timer wait
	}
}

// create PUTs a compute and waits until its operation ends.
func (h *harness) create(name string, body map[string]any) api.Compute {
	h.t.Helper()
	r := h.do("PUT", computePath(name), body).want(h.t, 201)
	if st := h.waitOp(r.Header.Get("Azure-AsyncOperation")); st.Status != api.OpSucceeded {
		h.t.Fatalf("create %s: operation %+v", name, st)
	}
	return h.do("GET", computePath(name), nil).want(h.t, 200).compute(h.t)
}

// absoluteLink checks a link is an absolute URL on this server that
// carries the api-version.
func (h *harness) absoluteLink(t *testing.T, link string) *url.URL {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || !u.IsAbs() {
		t.Fatalf("link %q is not absolute", link)
	}
	base, _ := url.Parse(h.url)
	if u.Host != base.Host {
		t.Errorf("link %q is not on the server %s", link, h.url)
	}
	if u.Query().Get("api-version") != hVersion {
		t.Errorf("link %q does not carry api-version=%s", link, hVersion)
	}
	return u
}
