package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/readmodel"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/ui"
)

// The harness serves the real API with the studio wired in, over a real
// SQLite store, with a fake clock for expiries.

const wsPath = "/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default"

type harness struct {
	t     *testing.T
	url   string
	token string
	db    *store.DB
	clock *clock.Fake
	ui    *ui.UI
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	studio := ui.New(ui.Options{Reads: readmodel.New(db), Clock: fc, Log: log, Subscription: "local", ResourceGroup: "local", Workspace: "default", Location: "local",
		SampleEvery: 10 * time.Second, HistoryWindow: time.Hour})
	srv := server.New(server.Config{Defaults: server.Defaults{Subscription: "local", ResourceGroup: "local", Location: "local", Workspace: "default"},
		Quotas: server.Quotas{FamilyCores: 100, TotalCores: 100, LowPriorityCores: 100}, DataDir: dir},
		server.Deps{DB: db, Box: box, Clock: fc, Log: log, UI: studio, Sessions: studio})
	if err := srv.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := server.EnsureAdminToken(ctx, db, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &harness{t: t, url: ts.URL, token: tok, db: db, clock: fc, ui: studio}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) cookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (a answer) errorCode() string {
	var e api.ErrorResponse
	if json.Unmarshal([]byte(a.body), &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}

// do sends a request with optional body, headers and cookie.
func (h *harness) do(method, path, body string, headers map[string]string, cookie *http.Cookie) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func form(token string) (string, map[string]string) {
	return url.Values{"token": {token}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
}

type session struct {
	Principal  string `json:"principal"`
	CSRF       string `json:"csrf"`
	CSRFHeader string `json:"csrfHeader"`
	Workspace  string `json:"workspace"`
}

// login signs in with the admin token and returns the cookie and session.
func (h *harness) login() (*http.Cookie, session) {
	h.t.Helper()
	body, hdr := form(h.token)
	a := h.do("POST", "/ui/login", body, hdr, nil)
	if a.status != 200 {
		h.t.Fatalf("login: %d %s", a.status, a.body)
	}
	c := a.cookie(ui.CookieName)
	if c == nil {
		h.t.Fatal("login set no session cookie")
	}
	var s session
	if err := json.Unmarshal([]byte(a.body), &s); err != nil {
		h.t.Fatal(err)
	}
	return c, s
}

func TestLoginSetsAStrictHttpOnlyCookieThatIsNotTheToken(t *testing.T) {
	h := newHarness(t)
	body, hdr := form(h.token)
	a := h.do("POST", "/ui/login", body, hdr, nil)
	if a.status != 200 {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	c := a.cookie(ui.CookieName)
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != int(ui.SessionTTL.Seconds()) {
		t.Fatalf("cookie %+v", c)
	}
	if strings.Contains(c.Value, h.token) || strings.Contains(a.body, h.token) {
		t.Fatal("the token leaked into the cookie or the answer")
	}
	var s session
	_ = json.Unmarshal([]byte(a.body), &s)
	if s.Principal != "admin" || s.CSRF == "" || s.CSRFHeader != ui.CSRFHeader || s.Workspace != "default" {
		t.Fatalf("session %+v", s)
	}
	got := h.do("GET", "/ui/session", "", nil, c)
	if got.status != 200 || !strings.Contains(got.body, s.CSRF) {
		t.Fatalf("GET /ui/session: %d %s", got.status, got.body)
	}
}

func TestLoginRefusals(t *testing.T) {
	h := newHarness(t)
	body, hdr := form("cml_wrong")
	if a := h.do("POST", "/ui/login", body, hdr, nil); a.status != 401 || a.cookie(ui.CookieName) != nil {
		t.Errorf("wrong token: %d %s", a.status, a.body)
	}
	body, hdr = form("")
	if a := h.do("POST", "/ui/login", body, hdr, nil); a.status != 400 {
		t.Errorf("empty token: %d %s", a.status, a.body)
	}
	// A form posted from another site cannot sign the browser in (login CSRF).
	body, hdr = form(h.token)
	hdr["Origin"] = "https://evil.example"
	if a := h.do("POST", "/ui/login", body, hdr, nil); a.status != 403 {
		t.Errorf("cross-origin login: %d %s", a.status, a.body)
	}
	body, hdr = form(h.token)
	hdr["Sec-Fetch-Site"] = "cross-site"
	if a := h.do("POST", "/ui/login", body, hdr, nil); a.status != 403 {
		t.Errorf("cross-site login: %d %s", a.status, a.body)
	}
	if a := h.do("GET", "/ui/session", "", nil, nil); a.status != 401 {
		t.Errorf("session without cookie: %d", a.status)
	}
	if a := h.do("GET", "/ui/session", "", nil, &http.Cookie{Name: ui.CookieName, Value: "cus_forged"}); a.status != 401 {
		t.Errorf("forged cookie: %d", a.status)
	}
}

func TestAPIAcceptsTheCookieAndWantsCSRFForChanges(t *testing.T) {
	h := newHarness(t)
	c, s := h.login()
	v := "?api-version=2024-04-01"
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 200 {
		t.Fatalf("GET with cookie: %d %s", a.status, a.body)
	}
	comp := `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"Standard_DS3_v2","scaleSettings":{"minNodeCount":0,"maxNodeCount":1}}}}`
	a := h.do("PUT", wsPath+"/computes/web-cluster"+v, comp, map[string]string{"Content-Type": "application/json"}, c)
	if a.status != 403 || a.errorCode() != api.CodeForbidden {
		t.Fatalf("PUT without CSRF: %d %s", a.status, a.body)
	}
	a = h.do("PUT", wsPath+"/computes/web-cluster"+v, comp, map[string]string{"Content-Type": "application/json", ui.CSRFHeader: "wrong"}, c)
	if a.status != 403 {
		t.Fatalf("PUT with a wrong CSRF value: %d %s", a.status, a.body)
	}
	a = h.do("PUT", wsPath+"/computes/web-cluster"+v, comp, map[string]string{"Content-Type": "application/json", ui.CSRFHeader: s.CSRF}, c)
	if a.status != 201 {
		t.Fatalf("PUT with CSRF: %d %s", a.status, a.body)
	}
	var out api.Compute
	_ = json.Unmarshal([]byte(a.body), &out)
	if out.SystemData == nil || out.SystemData.CreatedBy != "admin" {
		t.Errorf("systemData %+v: the session's principal should be recorded", out.SystemData)
	}
	// The bearer path is unchanged, and wins over a cookie.
	if a := h.do("GET", wsPath+"/computes"+v, "", map[string]string{"Authorization": "Bearer " + h.token}, nil); a.status != 200 {
		t.Errorf("bearer: %d", a.status)
	}
	if a := h.do("GET", wsPath+"/computes"+v, "", map[string]string{"Authorization": "Bearer cml_wrong"}, c); a.status != 401 {
		t.Errorf("wrong bearer with a good cookie: %d", a.status)
	}
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, nil); a.status != 401 {
		t.Errorf("no credentials: %d", a.status)
	}
}

func TestSessionsEndWithTimeRevocationAndSignOut(t *testing.T) {
	h := newHarness(t)
	v := "?api-version=2024-04-01"
	c, s := h.login()
	h.clock.Step(ui.SessionTTL - time.Minute)
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 200 {
		t.Fatalf("before expiry: %d", a.status)
	}
	h.clock.Step(time.Minute)
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 401 {
		t.Fatalf("after 12 h: %d", a.status)
	}

	// Sign-out needs the CSRF header, then the cookie is dead.
	c, s = h.login()
	if a := h.do("POST", "/ui/logout", "", nil, c); a.status != 403 {
		t.Fatalf("logout without CSRF: %d", a.status)
	}
	a := h.do("POST", "/ui/logout", "", map[string]string{ui.CSRFHeader: s.CSRF}, c)
	if a.status != 204 {
		t.Fatalf("logout: %d %s", a.status, a.body)
	}
	if k := a.cookie(ui.CookieName); k == nil || k.MaxAge >= 0 {
		t.Errorf("logout should clear the cookie: %+v", k)
	}
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 401 {
		t.Fatalf("after sign-out: %d", a.status)
	}

	// Revoking the token ends its sessions at once.
	c, _ = h.login()
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 200 {
		t.Fatalf("a new session: %d", a.status)
	}
	ctx := context.Background()
	tok, err := store.TokenByHash(ctx, h.db.Q(), secret.Hash(h.token))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeToken(ctx, h.db.W(), tok.ID); err != nil {
		t.Fatal(err)
	}
	if a := h.do("GET", wsPath+"/computes"+v, "", nil, c); a.status != 401 || !strings.Contains(a.body, "no longer valid") {
		t.Fatalf("after revocation: %d %s", a.status, a.body)
	}
}

// begin is a browser's start of `cumulus ui`'s sign-in: its binding
// cookie, and the binding the CLI's loopback port would be sent.
func (h *harness) begin() (*http.Cookie, string) {
	h.t.Helper()
	a := h.do("GET", "/ui/login/begin?port=45678&state=state-0123456789abcdef", "", nil, nil)
	c := a.cookie(ui.BindingCookie)
	loc, err := url.Parse(a.header.Get("Location"))
	if a.status != 302 || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || err != nil ||
		loc.Host != "127.0.0.1:45678" || loc.Path != "/callback" || loc.Query().Get("state") != "state-0123456789abcdef" {
		h.t.Fatalf("begin: %d %v %s", a.status, c, a.header.Get("Location"))
	}
	if b := loc.Query().Get("binding"); b == "" || strings.Contains(b, c.Value) {
		h.t.Fatalf("the binding %q is not the cookie's hash", b)
	}
	return c, loc.Query().Get("binding")
}

func TestOneTimeSignInLink(t *testing.T) {
	h := newHarness(t)
	if a := h.do("POST", "/ui/codes", "", nil, nil); a.status != 401 {
		t.Fatalf("codes without a token: %d", a.status)
	}
	mint := func(binding string) string {
		a := h.do("POST", "/ui/codes", `{"binding":"`+binding+`"}`, map[string]string{"Authorization": "Bearer " + h.token}, nil)
		if a.status != 200 {
			t.Fatalf("codes: %d %s", a.status, a.body)
		}
		var v struct {
			URL, Path string
			ExpiresIn int
		}
		_ = json.Unmarshal([]byte(a.body), &v)
		if !strings.HasPrefix(v.Path, "/ui/login?code=cuc_") || v.URL != h.url+v.Path || v.ExpiresIn != 60 || strings.Contains(a.body, h.token) {
			t.Fatalf("link %+v", v)
		}
		return v.Path
	}
	browser, binding := h.begin()
	p := mint(binding)
	a := h.do("GET", p, "", nil, browser)
	c := a.cookie(ui.CookieName)
	if a.status != 200 || c == nil || !c.HttpOnly || !strings.Contains(a.body, `http-equiv="refresh"`) {
		t.Fatalf("first use: %d %+v %s", a.status, c, a.body)
	}
	if s := h.do("GET", "/ui/session", "", nil, c); s.status != 200 {
		t.Fatalf("session from the link: %d", s.status)
	}
	if a := h.do("GET", p, "", nil, browser); a.status != 401 || a.cookie(ui.CookieName) != nil {
		t.Fatalf("second use: %d", a.status)
	}
	// A link bound to one browser does not sign another in (login CSRF):
	// neither one without a binding cookie nor one with its own.
	p = mint(binding)
	other, _ := h.begin()
	for _, victim := range []*http.Cookie{nil, other} {
		if a := h.do("GET", p, "", nil, victim); a.status != 401 || a.cookie(ui.CookieName) != nil || !strings.Contains(a.body, "another browser") {
			t.Fatalf("a link opened by another browser: %d %s", a.status, a.body)
		}
		p = mint(binding)
	}
	h.clock.Step(ui.CodeTTL)
	if a := h.do("GET", p, "", nil, browser); a.status != 401 {
		t.Fatalf("expired link: %d", a.status)
	}
	if a := h.do("GET", "/ui/login?code=cuc_made-up", "", nil, browser); a.status != 401 {
		t.Fatalf("made-up code: %d", a.status)
	}
	// A code is bound or not made; begin takes only what the CLI sends.
	for _, body := range []string{"", "{}", `{"binding":"not-a-hash"}`} {
		if a := h.do("POST", "/ui/codes", body, map[string]string{"Authorization": "Bearer " + h.token}, nil); a.status != 400 {
			t.Errorf("codes with %q: %d %s", body, a.status, a.body)
		}
	}
	for _, q := range []string{"port=0&state=state-0123456789abcdef", "port=80&state=short", "port=x&state=state-0123456789abcdef", "state=state-0123456789abcdef"} {
		if a := h.do("GET", "/ui/login/begin?"+q, "", nil, nil); a.status != 400 || a.cookie(ui.BindingCookie) != nil {
			t.Errorf("begin?%s: %d", q, a.status)
		}
	}
}

func TestPageAndAssets(t *testing.T) {
	h := newHarness(t)
	a := h.do("GET", "/", "", nil, nil)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(a.body, "/ui/static/js/app.js") {
		t.Fatalf("GET /: %d %s", a.status, a.header.Get("Content-Type"))
	}
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for _, p := range []string{"/ui/static/js/app.js", "/ui/static/js/api.js", "/ui/static/js/chart.js", "/ui/static/app.css"} {
		a := h.do("GET", p, "", nil, nil)
		if a.status != 200 || a.header.Get("Etag") == "" {
			t.Errorf("%s: %d", p, a.status)
		}
		if strings.HasSuffix(p, ".js") && !strings.Contains(a.header.Get("Content-Type"), "javascript") {
			t.Errorf("%s served as %q", p, a.header.Get("Content-Type"))
		}
		if b := h.do("GET", p, "", map[string]string{"If-None-Match": a.header.Get("Etag")}, nil); b.status != 304 {
			t.Errorf("%s revalidation: %d", p, b.status)
		}
	}
	if a := h.do("GET", "/ui/static/nope.js", "", nil, nil); a.status != 404 {
		t.Errorf("missing asset: %d", a.status)
	}
	if a := h.do("GET", "/ui/whatever", "", nil, nil); a.status != 404 || a.errorCode() != api.CodeNotFound {
		t.Errorf("unknown studio path: %d %s", a.status, a.body)
	}
	// API paths are not the studio's.
	if a := h.do("GET", "/subscriptions/local/providers/Microsoft.MachineLearningServices/locations/local/vmSizes?api-version=2024-04-01", "", nil, nil); a.status != 401 {
		t.Errorf("API without credentials: %d", a.status)
	}
	if a := h.do("GET", "/favicon.ico", "", nil, nil); a.status != 401 {
		t.Errorf("non-studio path: %d", a.status)
	}
}

func TestHistorySamplesNodesAndQueuedDemand(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sc := api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}
	id := sc.ComputeID("hist")
	comp := api.Compute{ID: id, Name: "hist"}
	comp.Properties.ComputeType = api.ComputeTypeAml
	comp.Aml().TargetNodeCount = 3
	if _, err := store.Put(ctx, h.db.W(), store.KindCompute, sc.WorkspaceID(), "hist", comp, store.IfNoneMatch, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for i, st := range []string{api.NodeRunning, api.NodeIdle, api.NodePreparing} {
		n := store.Node{ID: "tvm-hist-" + st, Compute: id, State: st, Created: h.clock.Now().Add(-time.Duration(i) * time.Minute)}
		if st == api.NodeIdle {
			n.IdleSince = h.clock.Now().Add(-30 * time.Second)
		}
		if err := store.PutNode(ctx, h.db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	for i, count := range []int32{2, 1} {
		j := api.Job{Name: "q" + string(rune('a'+i))}
		j.Properties.Status = api.JobQueued
		j.Properties.Resources = &api.JobResources{InstanceCount: count}
		if err := store.InsertJob(ctx, h.db.W(), &store.Job{UID: secret.NewID(), Parent: sc.WorkspaceID(), Compute: id, Created: h.clock.Now(), Doc: j}); err != nil {
			t.Fatal(err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); h.ui.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	c, _ := h.login()
	read := func(query string) (out struct {
		Now     time.Time   `json:"now"`
		Every   float64     `json:"everySeconds"`
		Samples []ui.Sample `json:"samples"`
		Nodes   []struct {
			NodeID    string     `json:"nodeId"`
			Created   time.Time  `json:"created"`
			IdleSince *time.Time `json:"idleSince"`
		} `json:"nodes"`
	}) {
		t.Helper()
		a := h.do("GET", "/ui/api/history?compute="+url.QueryEscape(id)+query, "", nil, c)
		if a.status != 200 {
			t.Fatalf("history: %d %s", a.status, a.body)
		}
		if err := json.Unmarshal([]byte(a.body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The sampler records a sample, then waits on the clock; once its timer
	// is set, the sample is there to read.
	sampled := func() {
		t.Helper()
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := h.clock.BlockUntil(wait, 1); err != nil {
			t.Fatalf("the sampler never waited for its next sample: %v", err)
		}
	}
	sampled()
	v := read("")
	if len(v.Samples) != 1 {
		t.Fatalf("%d samples before the clock moved", len(v.Samples))
	}
	s := v.Samples[0]
	if s.Running != 1 || s.Idle != 1 || s.Preparing != 1 || s.Queued != 3 || s.QueuedJobs != 2 || s.Target != 3 {
		t.Fatalf("sample %+v", s)
	}
	if v.Every != 10 || len(v.Nodes) != 3 {
		t.Fatalf("history %+v", v)
	}
	for _, n := range v.Nodes {
		if (n.IdleSince != nil) != (n.NodeID == "tvm-hist-idle") {
			t.Errorf("node %s idleSince %v", n.NodeID, n.IdleSince)
		}
	}

	// The sampler wakes on the clock.
	for want := 2; want <= 4; want++ {
		h.clock.Step(10 * time.Second)
		sampled()
		if n := len(read("").Samples); n != want {
			t.Fatalf("%d samples after %d steps", n, want-1)
		}
	}
	all := read("").Samples
	newer := read("&after=" + url.QueryEscape(all[1].Time.Format(time.RFC3339Nano))).Samples
	if len(newer) != len(all)-2 || !newer[0].Time.Equal(all[2].Time) {
		t.Fatalf("after %v: %+v", all[1].Time, newer)
	}
	last := all[len(all)-1].Time
	recent := read("&seconds=1").Samples
	if !h.clock.Now().Add(-time.Second).Before(last) {
		if len(recent) != 0 {
			t.Fatalf("last second: %+v", recent)
		}
	} else if len(recent) == 0 || !recent[len(recent)-1].Time.Equal(last) {
		t.Fatalf("last second: %+v", recent)
	}

	// Bad requests and authentication.
	for _, q := range []string{"", "?compute=nope", "?compute=" + url.QueryEscape(id) + "&seconds=x", "?compute=" + url.QueryEscape(id) + "&after=yesterday"} {
		if a := h.do("GET", "/ui/api/history"+q, "", nil, c); a.status != 400 {
			t.Errorf("%q: %d", q, a.status)
		}
	}
	if a := h.do("GET", "/ui/api/history?compute="+url.QueryEscape(id), "", nil, nil); a.status != 401 {
		t.Errorf("history without credentials: %d", a.status)
	}
	if a := h.do("GET", "/ui/api/history?compute="+url.QueryEscape(id), "", map[string]string{"Authorization": "Bearer " + h.token}, nil); a.status != 200 {
		t.Errorf("history with a bearer token: %d", a.status)
	}
}

// principalToken makes a principal (with role at "/" unless role is "")
// and a token of it, straight in the store.
func (h *harness) principalToken(name, role string) string {
	h.t.Helper()
	ctx := context.Background()
	if err := store.PutPrincipal(ctx, h.db.W(), store.Principal{Name: name, Kind: "User", Created: h.clock.Now()}); err != nil {
		h.t.Fatal(err)
	}
	tok := secret.NewToken("cml_")
	if err := store.InsertToken(ctx, h.db.W(), store.Token{ID: secret.NewID(), Name: name, Hash: secret.Hash(tok), Created: h.clock.Now()}); err != nil {
		h.t.Fatal(err)
	}
	if role != "" {
		if err := store.PutRoleAssignment(ctx, h.db.W(), store.RoleAssignment{ID: secret.NewID(), Principal: name, Role: role, Scope: "/", Created: h.clock.Now()}); err != nil {
			h.t.Fatal(err)
		}
	}
	return tok
}

// A principal with no role anywhere gets no session and no sign-in link;
// one that signs in again and again ends only its own oldest sessions,
// never another principal's.
func TestSessionsBoundedPerPrincipalAndRefusedWithoutARole(t *testing.T) {
	h := newHarness(t)
	owner, _ := h.login()

	nobody := h.principalToken("nobody", "")
	body, hdr := form(nobody)
	if a := h.do("POST", "/ui/login", body, hdr, nil); a.status != 403 || a.cookie(ui.CookieName) != nil || !strings.Contains(a.body, "no role") {
		t.Errorf("sign-in with no role: %d %s", a.status, a.body)
	}
	if a := h.do("POST", "/ui/codes", "", map[string]string{"Authorization": "Bearer " + nobody}, nil); a.status != 403 {
		t.Errorf("sign-in link with no role: %d %s", a.status, a.body)
	}

	reader := h.principalToken("reader", "Reader")
	var first, last *http.Cookie
	for i := 0; i < ui.MaxSessionsPerPrincipal+5; i++ {
		h.clock.Step(time.Second) // each session a little younger than the last
		body, hdr := form(reader)
		a := h.do("POST", "/ui/login", body, hdr, nil)
		if a.status != 200 {
			t.Fatalf("sign-in %d: %d %s", i, a.status, a.body)
		}
		last = a.cookie(ui.CookieName)
		if first == nil {
			first = last
		}
	}
	if a := h.do("GET", "/ui/session", "", nil, first); a.status != 401 {
		t.Errorf("the reader's oldest session: %d, want ended", a.status)
	}
	if a := h.do("GET", "/ui/session", "", nil, last); a.status != 200 {
		t.Errorf("the reader's newest session: %d", a.status)
	}
	if a := h.do("GET", "/ui/session", "", nil, owner); a.status != 200 {
		t.Errorf("the owner's session after the reader's sign-ins: %d, want kept", a.status)
	}
}
