package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Fuzz tests of request decoding: arbitrary bytes as PUT and PATCH bodies
// go through the real handler and a real SQLite store. The server may
// refuse them (4xx, ARM error shape) but must never panic or answer 5xx,
// and what it stores must stay valid. Run the seeds with `go test`; fuzz
// with
//
//	go test ./internal/server/ -run '^$' -fuzz FuzzComputePut -fuzztime 60s
//	go test ./internal/server/ -run '^$' -fuzz FuzzComputePatch -fuzztime 60s

type fuzzEnv struct {
	srv   *server.Server
	ops   *controller.Operations
	token string
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	ctx := context.Background()
	dir := f.TempDir()
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "cumulus.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "secret.key"))
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	ops := &controller.Operations{DB: db, Clock: clock.Real{}, Log: log}
	ops.Init()
	cfg := server.Config{Defaults: server.Defaults{Subscription: hSub, ResourceGroup: hRG, Location: hLoc, Workspace: hWS},
		Quotas: server.Quotas{FamilyCores: 400, TotalCores: 1000, LowPriorityCores: 500}, DataDir: dir}
	srv := server.New(cfg, server.Deps{DB: db, Box: box, Clock: clock.Real{}, Log: log, Ops: ops})
	if err := srv.EnsureDefaults(ctx); err != nil {
		f.Fatal(err)
	}
	tok, err := server.EnsureAdminToken(ctx, db, time.Now())
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzEnv{srv: srv, ops: ops, token: tok}
}

func (e *fuzzEnv) call(t *testing.T, method, path string, body []byte) *resp {
	t.Helper()
	req := httptest.NewRequest(method, withVersion(path), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	r := &resp{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	if r.Status >= 500 {
		t.Fatalf("%s %s with body %q: %d %s", method, path, body, r.Status, r.Body)
	}
	if r.Status >= 400 {
		checkErrorShape(t, method+" "+path, r)
	}
	return r
}

// checkStored asserts the invariants of a compute the server accepted.
func checkStored(t *testing.T, r *resp, what string) {
	t.Helper()
	var c api.Compute
	if err := json.Unmarshal(r.Body, &c); err != nil {
		t.Fatalf("%s: answer is not a compute: %v: %s", what, err, r.Body)
	}
	a := c.Aml()
	s := a.ScaleSettings
	if c.Properties.ComputeType != api.ComputeTypeAml || s == nil || s.MaxNodeCount == nil || s.MinNodeCount == nil ||
		*s.MaxNodeCount < 1 || *s.MinNodeCount < 0 || *s.MinNodeCount > *s.MaxNodeCount {
		t.Fatalf("%s: stored compute breaks its invariants: %s", what, r.Body)
	}
	if _, err := api.ParseDuration(s.NodeIdleTimeBeforeScaleDown); err != nil {
		t.Fatalf("%s: stored idle time %q: %v", what, s.NodeIdleTimeBeforeScaleDown, err)
	}
	if a.VMSize == "" || a.VMPriority == "" || a.OSType != api.OSLinux {
		t.Fatalf("%s: stored size/priority/os %q %q %q", what, a.VMSize, a.VMPriority, a.OSType)
	}
	if u := a.UserAccountCredentials; u != nil && u.AdminUserPassword != "" {
		t.Fatalf("%s: password returned: %s", what, r.Body)
	}
}

var putSeeds = []string{
	`{"properties":{"computeType":"AmlCompute"}}`,
	`{"location":"westus2","tags":{"a":"b"},"properties":{"computeType":"AmlCompute","description":"d","properties":{"vmSize":"Standard_DS3_v2","vmPriority":"Dedicated","scaleSettings":{"minNodeCount":0,"maxNodeCount":4,"nodeIdleTimeBeforeScaleDown":"PT5M"}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"standard_nc6s_v3","vmPriority":"lowpriority","remoteLoginPortPublicAccess":"enabled","enableNodePublicIp":false}}}`,
	`{"identity":{"type":"SystemAssigned"},"properties":{"computeType":"AmlCompute"}}`,
	`{"identity":{"type":"UserAssigned","userAssignedIdentities":{"/subscriptions/s/resourceGroups/g/providers/Microsoft.ManagedIdentity/userAssignedIdentities/u":null}},"properties":{"computeType":"AmlCompute"}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"userAccountCredentials":{"adminUserName":"azureuser","adminUserPassword":"Str0ngPassw0rd!"}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"subnet":{"id":"/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n"}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":0}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":2147483648}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"minNodeCount":-1,"maxNodeCount":-1}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":2,"nodeIdleTimeBeforeScaleDown":"P99999999999999999999D"}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":2,"nodeIdleTimeBeforeScaleDown":"PT1e308S"}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":null,"subnet":null,"userAccountCredentials":null}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":null}}`,
	`{"properties":null}`,
	`{"identity":null,"sku":{"capacity":3},"systemData":{"createdAt":"2020-01-01T00:00:00Z"}}`,
	`{"properties":{"computeType":"AmlCompute","provisioningState":"Succeeded","createdOn":"1999-01-01T00:00:00Z","properties":{"currentNodeCount":99,"propertyBag":{"x":[1,{"y":null}]}}}}`,
	`{"properties":{"computeType":"AmlCompute","properties":{"osType":"Windows","virtualMachineImage":{"id":"x"}}}}`,
	`{"tags":{"":"","a<":"` + strings.Repeat("v", 300) + `"},"properties":{"computeType":"AmlCompute"}}`,
	`{"properties":{"computeType":"AmlCompute","createdOn":"not a time"}}`,
	`{"properties":{"computeType":"\u0000"}}`,
	`null`, `[]`, `{}`, ``, `{`, `"x"`, `1e999`, `{"properties":{"computeType":"AmlCompute"}}{}`,
}

func FuzzComputePut(f *testing.F) {
	for _, s := range putSeeds {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		// The same name each time: later inputs update what earlier
		// ones created, which exercises the immutability checks too.
		for _, name := range []string{"fuzz-put", "fuzz-put-b"} {
			r := env.call(t, "PUT", computePath(name), body)
			if r.Status == 200 || r.Status == 201 {
				checkStored(t, r, "PUT answer")
				g := env.call(t, "GET", computePath(name), nil)
				if g.Status != 200 {
					t.Fatalf("GET after accepted PUT: %d %s", g.Status, g.Body)
				}
				checkStored(t, g, "GET after PUT")
			}
			if err := env.ops.RunOnce(ctx); err != nil {
				t.Fatalf("operations after PUT %q: %v", body, err)
			}
		}
		env.call(t, "GET", hWSPath+"/computes", nil)
	})
}

func FuzzComputePatch(f *testing.F) {
	for _, s := range []string{
		`{"properties":{"properties":{"scaleSettings":{"maxNodeCount":4,"minNodeCount":0,"nodeIdleTimeBeforeScaleDown":"PT5M"}}}}`,
		`{"properties":{"properties":{"scaleSettings":{"maxNodeCount":1}}}}`,
		`{"properties":{"properties":{"scaleSettings":{"minNodeCount":3}}}}`,
		`{"properties":{"properties":{"scaleSettings":{"nodeIdleTimeBeforeScaleDown":"P8D"}}}}`,
		`{"properties":{"properties":{"scaleSettings":{"maxNodeCount":-5}}}}`,
		`{"properties":{"properties":{"scaleSettings":{}}}}`,
		`{"properties":{"properties":{"scaleSettings":null}}}`,
		`{"properties":{"properties":null}}`,
		`{"properties":{"scaleSettings":{"maxNodeCount":3}}}`,
		`{"properties":null}`, `{}`, `null`, ``, `[`, `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":1.5}}}}`,
	} {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		const name = "fuzz-patch"
		if g := env.call(t, "GET", computePath(name), nil); g.Status == 404 {
			r := env.call(t, "PUT", computePath(name), []byte(putSeeds[1]))
			if r.Status != 201 {
				t.Fatalf("setup PUT: %d %s", r.Status, r.Body)
			}
			if err := env.ops.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r := env.call(t, "PATCH", computePath(name), body)
		if r.Status == 200 {
			checkStored(t, r, "PATCH answer")
		} else if r.Status != http.StatusBadRequest {
			t.Fatalf("PATCH answered %d: %s", r.Status, r.Body)
		}
		g := env.call(t, "GET", computePath(name), nil)
		if g.Status != 200 {
			t.Fatalf("GET after PATCH: %d %s", g.Status, g.Body)
		}
		checkStored(t, g, "GET after PATCH")
	})
}
