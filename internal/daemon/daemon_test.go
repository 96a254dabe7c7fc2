package daemon_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

const (
	dSub = "sub1"
	dRG  = "rg1"
	dWS  = "ws1"
	dLoc = "westus2"
)

var dWSPath = "/subscriptions/" + dSub + "/resourceGroups/" + dRG + "/providers/Microsoft.MachineLearningServices/workspaces/" + dWS

func options(t *testing.T, dir string) daemon.Options {
	o := daemon.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = dir
	o.Defaults = server.Defaults{Subscription: dSub, ResourceGroup: dRG, Location: dLoc, Workspace: dWS}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

func start(t *testing.T, o daemon.Options) *daemon.Daemon {
	t.Helper()
	d, err := daemon.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stop(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

type caller struct {
	t     *testing.T
	base  string
	token string
	http  *http.Client
}

func (c caller) do(method, path string, body string) (int, http.Header, []byte) {
	c.t.Helper()
	u := path
	if !strings.HasPrefix(u, "http") {
		u = c.base + path
	}
	if !strings.Contains(u, "api-version=") {
		if strings.Contains(u, "?") {
			u += "&api-version=2024-04-01"
		} else {
			u += "?api-version=2024-04-01"
		}
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

func TestStartMintsTokenOnceAndWritesConfig(t *testing.T) {
	dir := t.TempDir()
	d := start(t, options(t, dir))
	if d.Token == "" || !strings.HasPrefix(d.URL, "http://127.0.0.1:") || d.CAFile != "" {
		t.Fatalf("first start: token %q url %q ca %q", d.Token, d.URL, d.CAFile)
	}
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != d.URL || cfg.Token != d.Token || cfg.Subscription != dSub || cfg.ResourceGroup != dRG || cfg.Workspace != dWS || cfg.Location != dLoc {
		t.Errorf("config %+v", cfg)
	}
	if fi, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.yaml mode %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "secret.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.key mode %v %v", fi.Mode(), err)
	}
	c := caller{t: t, base: d.URL, token: d.Token, http: http.DefaultClient}
	if st, _, b := c.do("GET", dWSPath, ""); st != 200 {
		t.Fatalf("default workspace: %d %s", st, b)
	}
	token := d.Token
	stop(t, d)

	// A second start keeps the token: none is minted, the old one works.
	d = start(t, options(t, dir))
	defer stop(t, d)
	if d.Token != "" && d.Token != token {
		t.Errorf("second start minted a new token")
	}
	c.base = d.URL
	if st, _, b := c.do("GET", dWSPath, ""); st != 200 {
		t.Fatalf("old token after restart: %d %s", st, b)
	}
	cfg, _ = config.Load(filepath.Join(dir, "config.yaml"))
	if cfg.Server != d.URL || cfg.Token != token {
		t.Errorf("config after restart: %+v (url %s)", cfg, d.URL)
	}
}

func TestStartTLSSelfSigned(t *testing.T) {
	o := options(t, t.TempDir())
	o.TLSSelfSigned = true
	d := start(t, o)
	defer stop(t, d)
	if !strings.HasPrefix(d.URL, "https://localhost:") || d.CAFile == "" {
		t.Fatalf("url %q ca %q", d.URL, d.CAFile)
	}
	pem, err := os.ReadFile(d.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(o.DataDir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v %v", fi, err)
	}
	if cfg, err := config.Load(filepath.Join(o.DataDir, "config.yaml")); err != nil || cfg.CAFile != d.CAFile || cfg.Server != d.URL {
		t.Errorf("config for TLS: %+v %v", cfg, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	c := caller{t: t, base: d.URL, token: d.Token, http: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	if st, _, b := c.do("GET", dWSPath, ""); st != 200 {
		t.Fatalf("GET over TLS: %d %s", st, b)
	}
	// A client that does not trust the certificate is refused.
	req, _ := http.NewRequest("GET", d.URL+dWSPath+"?api-version=2024-04-01", nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Error("an untrusting client connected")
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := map[string]func(o *daemon.Options){
		"cert without key":              func(o *daemon.Options) { o.TLSCert = "c.pem" },
		"key without cert":              func(o *daemon.Options) { o.TLSKey = "k.pem" },
		"cert and self-signed":          func(o *daemon.Options) { o.TLSCert, o.TLSKey, o.TLSSelfSigned = "c", "k", true },
		"bad listen":                    func(o *daemon.Options) { o.Listen = "nonsense" },
		"plain HTTP on all addrs":       func(o *daemon.Options) { o.Listen = "0.0.0.0:8787" },
		"plain HTTP on a public ip":     func(o *daemon.Options) { o.Listen = "10.1.2.3:8787" },
		"negative quota":                func(o *daemon.Options) { o.Quotas.TotalCores = -1 },
		"negative family quota":         func(o *daemon.Options) { o.Quotas.FamilyCores = -1 },
		"negative low priority quota":   func(o *daemon.Options) { o.Quotas.LowPriorityCores = -1 },
		"unknown provider":              func(o *daemon.Options) { o.Provider = "nomad" },
		"docker without a node image":   func(o *daemon.Options) { o.Provider, o.NodeImage = "docker", "" },
		"locations without the default": func(o *daemon.Options) { o.Locations = []string{"westeurope"} },
		"a location with a space":       func(o *daemon.Options) { o.Locations = []string{o.Defaults.Location, "west europe"} },
		"negative blob size":            func(o *daemon.Options) { o.MaxBlobSize = -1 },
		"metrics on all addresses":      func(o *daemon.Options) { o.MetricsListen = "0.0.0.0:9787" },
		"bad metrics listen":            func(o *daemon.Options) { o.MetricsListen = "9787" },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			o := options(t, t.TempDir())
			mut(&o)
			if err := o.Validate(); err == nil {
				t.Error("Validate accepted it")
			}
			if _, err := daemon.Start(context.Background(), o); err == nil {
				t.Error("Start accepted it")
			}
		})
	}
	for _, l := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		o := options(t, t.TempDir())
		o.Listen = l
		if err := o.Validate(); err != nil {
			t.Errorf("listen %s: %v", l, err)
		}
	}
	o := options(t, t.TempDir())
	o.Provider = "docker"
	if err := o.Validate(); err != nil {
		t.Errorf("docker provider: %v", err)
	}
	o = options(t, t.TempDir())
	o.Listen, o.TLSSelfSigned = "0.0.0.0:0", true
	if err := o.Validate(); err != nil {
		t.Errorf("TLS on all addresses: %v", err)
	}
}

// TestCrashAfterAcceptRecovers builds, deterministically, the data
// directory a crash leaves right after the server answered PUT 201 and
// DELETE 202 but before the operations ran: the same store and handler,
// with no operations runner, then the database closed. A daemon started on
// that directory must finish both operations.
func TestCrashAfterAcceptRecovers(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	defaults := server.Defaults{Subscription: dSub, ResourceGroup: dRG, Location: dLoc, Workspace: dWS}
	srv := server.New(server.Config{Defaults: defaults, DataDir: dir}, server.Deps{DB: db, Box: box, Clock: clock.Real{}, Log: log})
	if err := srv.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	token, err := server.EnsureAdminToken(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	c := caller{t: t, base: ts.URL, token: token, http: ts.Client()}
	body := `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"Standard_DS2_v2","scaleSettings":{"maxNodeCount":2},` +
		`"userAccountCredentials":{"adminUserName":"azureuser","adminUserPassword":"Crash-Test-Pa55word"}}}}`

	// "gone" exists and is Succeeded, as if its create ran long ago.
	if st, _, b := c.do("PUT", dWSPath+"/computes/gone", body); st != 201 {
		t.Fatalf("PUT gone: %d %s", st, b)
	}
	if err := db.Tx(ctx, func(q store.Querier) error {
		d, err := store.Get[api.Compute](ctx, q, store.KindCompute, (api.Scope{Subscription: dSub, ResourceGroup: dRG, Workspace: dWS}).WorkspaceID(), "gone")
		if err != nil {
			return err
		}
		d.Value.Properties.ProvisioningState = api.StateSucceeded
		_, err = store.Put(ctx, q, store.KindCompute, (api.Scope{Subscription: dSub, ResourceGroup: dRG, Workspace: dWS}).WorkspaceID(), "gone", d.Value, d.Version, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st, h, b := c.do("PUT", dWSPath+"/computes/fresh", body)
	if st != 201 {
		t.Fatalf("PUT fresh: %d %s", st, b)
	}
	createOp := h.Get("Azure-AsyncOperation")
	st, h, b = c.do("DELETE", dWSPath+"/computes/gone?underlyingResourceAction=Delete", "")
	if st != 202 {
		t.Fatalf("DELETE gone: %d %s", st, b)
	}
	deleteOp := h.Get("Azure-AsyncOperation")
	// The crash: nothing else runs; the process state is lost.
	ts.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	d := start(t, options(t, dir))
	defer stop(t, d)
	c = caller{t: t, base: d.URL, token: token, http: http.DefaultClient}
	rebase := func(link string) string { return d.URL + link[strings.Index(link, "/subscriptions/"):] }
	deadline := time.Now().Add(15 * time.Second)
	for {
		var s1, s2 api.OperationStatus
		_, _, b1 := c.do("GET", rebase(createOp), "")
		_, _, b2 := c.do("GET", rebase(deleteOp), "")
		_ = json.Unmarshal(b1, &s1)
		_ = json.Unmarshal(b2, &s2)
		if s1.Status == "Succeeded" && s2.Status == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operations after restart: create %s, delete %s", b1, b2)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	st, _, b = c.do("GET", dWSPath+"/computes/fresh", "")
	var fresh api.Compute
	_ = json.Unmarshal(b, &fresh)
	if st != 200 || fresh.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("fresh after restart: %d %s", st, b)
	}
	if st, _, b := c.do("GET", dWSPath+"/computes/gone", ""); st != 404 {
		t.Errorf("gone after restart: %d %s", st, b)
	}
	var page api.Page[api.Compute]
	_, _, b = c.do("GET", dWSPath+"/computes", "")
	if err := json.Unmarshal(b, &page); err != nil || len(page.Value) != 1 || page.Value[0].Name != "fresh" {
		t.Errorf("list after restart: %s", b)
	}
	// The sealed password survived with the key file; the deleted one is gone.
	_, _, b = c.do("POST", dWSPath+"/computes/fresh/listKeys", "")
	if !bytes.Contains(b, []byte("Crash-Test-Pa55word")) {
		t.Errorf("listKeys after restart: %s", b)
	}
	if _, err := store.GetSecret(ctx, d.DB.Q(), (api.Scope{Subscription: dSub, ResourceGroup: dRG, Workspace: dWS}).ComputeID("gone")); err == nil {
		t.Error("the deleted compute's secret is still stored")
	}
}
