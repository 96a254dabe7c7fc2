package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// user creates a principal with role at scope and returns its token.
func (h *harness) user(name, role, scope string) string {
	h.t.Helper()
	h.do("POST", "/cumulus/v1/auth/principals", map[string]any{"name": name, "kind": "User"}).want(h.t, 201)
	var tok server.TokenCreated
	h.do("POST", "/cumulus/v1/auth/tokens", map[string]any{"principal": name}).want(h.t, 201).json(h.t, &tok)
	if role != "" {
		h.grant(name, role, scope)
	}
	return tok.Token
}

// grant gives a principal a role at a scope.
func (h *harness) grant(name, role, scope string) {
	h.t.Helper()
	h.do("POST", "/cumulus/v1/auth/roleAssignments", map[string]any{"principal": name, "role": role, "scope": scope}).want(h.t, 201)
}

// as calls the API with another token.
func (h *harness) as(token, method, path string, body any) *resp {
	h.t.Helper()
	return h.raw(method, withVersion(path), body, "Authorization", "Bearer "+token)
}

func identityPath(name string) string {
	return "/subscriptions/" + hSub + "/resourceGroups/" + hRG + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/" + name
}

func withUserIdentity(ids ...string) func(m map[string]any) {
	return func(m map[string]any) {
		ua := map[string]any{}
		for _, id := range ids {
			ua[id] = map[string]any{}
		}
		m["identity"] = map[string]any{"type": "UserAssigned", "userAssignedIdentities": ua}
	}
}

// auditOf lists the audit entries of one resource.
func (h *harness) auditOf(resource string) []store.AuditEntry {
	h.t.Helper()
	es, err := store.ListAudit(context.Background(), h.db.Q(), store.AuditFilter{Resource: resource, Limit: 10000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, e := range es {
		if strings.EqualFold(e.Resource, resource) {
			out = append(out, e)
		}
	}
	return out
}

// A Contributor of the workspace cannot attach an identity of the
// resource group it cannot assign (403, nothing made); with
// ManagedIdentityOperator on that identity it can. An identity that does
// not exist is 400 for a caller who may assign it, and 403 (no hint that
// it is missing) for one who may not.
func TestAttachUserIdentityNeedsAssignPermission(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.do("PUT", identityPath("team-b-identity"), map[string]any{"location": hLoc}).want(t, 201)
	alice := h.user("alice", "Contributor", hWSPath)

	r := h.as(alice, "PUT", computePath("stolen"), computeBody(withUserIdentity(identityPath("team-b-identity")))).want(t, 403, api.CodeForbidden)
	if !strings.Contains(string(r.Body), "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action") {
		t.Errorf("refusal does not name the action: %s", r.Body)
	}
	h.do("GET", computePath("stolen"), nil).want(t, 404)
	h.as(alice, "PUT", computePath("ghost"), computeBody(withUserIdentity(identityPath("no-such")))).want(t, 403, api.CodeForbidden)

	// Team B's owner lets alice use its identity.
	h.grant("alice", "Managed Identity Operator", identityPath("team-b-identity"))
	r = h.as(alice, "PUT", computePath("shared"), computeBody(withUserIdentity(identityPath("team-b-identity")))).want(t, 201)
	if c := r.compute(t); c.Identity == nil || len(c.Identity.UserAssignedIdentities) != 1 {
		t.Errorf("identity not attached: %s", r.Body)
	}
	// The operator role alone writes nothing and reads nothing.
	bob := h.user("bob", "ManagedIdentityOperator", identityPath("team-b-identity"))
	h.as(bob, "PUT", computePath("bobs"), computeBody()).want(t, 403)
	h.as(bob, "GET", identityPath("team-b-identity"), nil).want(t, 403)

	// Over the whole group: a missing identity is now 400, the ARM shape.
	h.grant("alice", "ManagedIdentityOperator", "/subscriptions/"+hSub+"/resourceGroups/"+hRG)
	h.as(alice, "PUT", computePath("ghost"), computeBody(withUserIdentity(identityPath("no-such")))).want(t, 400, api.CodeValidationError)
	h.do("PUT", computePath("ghost"), computeBody(withUserIdentity(identityPath("no-such")))).want(t, 400, api.CodeValidationError)
	h.do("GET", computePath("ghost"), nil).want(t, 404)

	// Workspaces carry identities too.
	carol := h.user("carol", "Contributor", "/subscriptions/"+hSub+"/resourceGroups/rg9")
	h.as(carol, "PUT", wsPath("rg9", "ws9"), map[string]any{"location": hLoc, "identity": map[string]any{"type": "UserAssigned",
		"userAssignedIdentities": map[string]any{identityPath("team-b-identity"): map[string]any{}}}}).want(t, 403, api.CodeForbidden)
	h.do("GET", wsPath("rg9", "ws9"), nil).want(t, 404)
}

// Locations are the configured list: a made-up one is 400 for computes,
// workspaces, quotas, usages and quota updates, naming the valid ones.
func TestMadeUpLocationRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, c := range []struct {
		what string
		r    *resp
	}{
		{"compute location", h.do("PUT", computePath("away"), computeBody(func(m map[string]any) { m["location"] = "elsewhere" }))},
		{"compute computeLocation", h.do("PUT", computePath("away"), computeBody(func(m map[string]any) {
			m["properties"].(map[string]any)["computeLocation"] = "elsewhere"
		}))},
		{"workspace", h.do("PUT", wsPath(hRG, "away"), map[string]any{"location": "elsewhere"})},
		{"usages", h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/elsewhere/usages", nil)},
		{"quotas", h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/elsewhere/quotas", nil)},
		{"vmSizes", h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/elsewhere/vmSizes", nil)},
		{"updateQuotas", h.do("POST", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/elsewhere/updateQuotas",
			map[string]any{"value": []any{map[string]any{"id": "x/quotas/standardDSv2Family", "limit": 100000}}})},
	} {
		if c.r.Status != 400 || c.r.errCode(t) != server.CodeLocationNotAvailable || !strings.Contains(string(c.r.Body), hLoc+", eastus") {
			t.Errorf("%s: %d %s; want 400 %s naming %s, eastus", c.what, c.r.Status, c.r.Body, server.CodeLocationNotAvailable, hLoc)
		}
	}
	h.do("GET", computePath("away"), nil).want(t, 404)
	h.do("GET", wsPath(hRG, "away"), nil).want(t, 404)
	// Configured locations work, in any case.
	h.create("east", computeBody(func(m map[string]any) { m["location"] = "EastUS" }))
	h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/eastus/usages", nil).want(t, 200)
}

func TestCheckLocations(t *testing.T) {
	for _, c := range []struct {
		list []string
		def  string
		ok   bool
	}{
		{nil, "local", true},
		{[]string{"local"}, "local", true},
		{[]string{"westeurope", "Local"}, "local", true},
		{[]string{"westeurope"}, "local", false},
		{[]string{"local", "local"}, "local", false},
		{[]string{"local", "west europe"}, "local", false},
		{[]string{"local", ""}, "local", false},
	} {
		if err := server.CheckLocations(c.list, c.def); (err == nil) != c.ok {
			t.Errorf("CheckLocations(%q, %q) = %v, want ok %v", c.list, c.def, err, c.ok)
		}
	}
}

// cancelOnNotify cancels the current request's context when the server
// says it committed a change: the client is gone from then on.
type cancelOnNotify struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (c *cancelOnNotify) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
}

// A committed write has its audit entry even when the client's context
// ends right after the commit (the entry is written in the write's
// transaction); its status is the answer's. A refused write is recorded
// too, and no entry says a refused write succeeded.
func TestAuditWrittenWithTheWrite(t *testing.T) {
	n := &cancelOnNotify{}
	h := newHarness(t, harnessOpts{clusters: n})
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		n.mu.Lock()
		n.cancel = cancel
		n.mu.Unlock()
		name := "gone" + string(rune('a'+i))
		body := strings.NewReader(`{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":1}}}}`)
		req := httptest.NewRequestWithContext(ctx, "PUT", withVersion(computePath(name)), body)
		req.Header.Set("Authorization", "Bearer "+h.token)
		h.srv.ServeHTTP(httptest.NewRecorder(), req)
		cancel()
		h.do("GET", computePath(name), nil).want(t, 200)
		es := h.auditOf(computePath(name))
		if len(es) != 1 || es[0].Status < 200 || es[0].Status > 299 || es[0].Principal != "admin" {
			t.Fatalf("compute %s committed; audit entries %+v, want one success by admin", name, es)
		}
	}
	n.mu.Lock()
	n.cancel = nil
	n.mu.Unlock()

	created := h.do("PUT", computePath("kept"), computeBody()).want(t, 201)
	h.waitOp(created.Header.Get("Azure-AsyncOperation"))
	h.do("PUT", computePath("kept"), computeBody()).want(t, 200)
	reader := h.user("rita", "Reader", hWSPath)
	h.as(reader, "PUT", computePath("kept"), computeBody()).want(t, 403)
	var got []int
	for _, e := range h.auditOf(computePath("kept")) {
		got = append(got, e.Status)
	}
	if len(got) != 3 || got[0] != 201 || got[1] != 200 || got[2] != 403 {
		t.Errorf("audit statuses %v, want [201 200 403]", got)
	}
	// A job's create is recorded as the 201 it answers, its re-submit as 200.
	job := hWSPath + "/jobs/audited"
	h.do("PUT", job, jobBody("kept")).want(t, 201)
	h.do("PUT", job, jobBody("kept")).want(t, 200)
	got = nil
	for _, e := range h.auditOf(job) {
		got = append(got, e.Status)
	}
	if len(got) != 2 || got[0] != 201 || got[1] != 200 {
		t.Errorf("job audit statuses %v, want [201 200]", got)
	}
	if strings.Contains(h.logs.String(), "audit record lost") {
		t.Errorf("an audit record was lost:\n%s", h.logs.String())
	}
}

func blobPath(digest, wsID string) string {
	return "/cumulus/v1/blobs/" + digest + "?workspace=" + wsID
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// putBlob uploads raw bytes as token.
func (h *harness) putBlob(token, digest, wsID string, data []byte) *resp {
	h.t.Helper()
	return h.raw("PUT", blobPath(digest, wsID), data, "Authorization", "Bearer "+token, "Content-Type", "application/octet-stream")
}

// Blobs need a write role in the workspace they are uploaded to, belong
// to it, are read only there, are audited, verified and bounded.
func TestBlobsBelongToAWorkspace(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.MaxBlobSize = 1024 }})
	ws2 := wsPath(hRG, "ws2")
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	reader := h.user("rita", "Reader", hWSPath)
	writer := h.user("wes", "Contributor", hWSPath)
	other := h.user("otto", "Contributor", ws2)

	data := []byte("code snapshot")
	d := digestOf(data)
	h.putBlob(reader, d, hWSPath, data).want(t, 403, api.CodeForbidden)
	h.putBlob(other, d, hWSPath, data).want(t, 403, api.CodeForbidden)
	h.putBlob(writer, d, "", data).want(t, 400)
	h.putBlob(writer, d, hWSPath, []byte("other bytes")).want(t, 400)
	h.putBlob(writer, d, hWSPath, data).want(t, 204)
	// Now stored: bytes that do not match are still refused (an upload
	// proves the sender holds the content, not only its digest).
	h.putBlob(other, d, ws2, []byte("not the snapshot")).want(t, 400)
	h.putBlob(writer, digestOf(make([]byte, 1025)), hWSPath, make([]byte, 1025)).want(t, 413, server.CodeRequestTooLarge)
	h.putBlob(writer, digestOf(make([]byte, 1024)), hWSPath, make([]byte, 1024)).want(t, 204)

	if r := h.as(reader, "GET", blobPath(d, hWSPath), nil).want(t, 200); !bytes.Equal(r.Body, data) {
		t.Errorf("download %q", r.Body)
	}
	h.as(other, "GET", blobPath(d, ws2), nil).want(t, 404)
	h.as(other, "GET", blobPath(d, hWSPath), nil).want(t, 403)
	h.as(reader, "GET", "/cumulus/v1/blobs/"+d, nil).want(t, 400)
	h.raw("GET", blobPath(d, hWSPath), nil).want(t, 401)

	es := h.auditOf(hWSPath + "/blobs/" + d)
	var statuses []int
	for _, e := range es {
		statuses = append(statuses, e.Status)
		if e.Operation != "Microsoft.MachineLearningServices/workspaces/blobs/write" {
			t.Errorf("audit operation %q", e.Operation)
		}
	}
	if len(statuses) != 4 || statuses[0] != 403 || statuses[1] != 403 || statuses[2] != 400 || statuses[3] != 204 {
		t.Errorf("audit of the blob: %v, want [403 403 400 204] (reader, other team, wrong bytes, upload)", statuses)
	}

	// A job may use only its own workspace's blobs.
	h.create("cpu", computeBody())
	job := func(code string) map[string]any {
		return map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": computePath("cpu"), "codeId": code}}
	}
	h.do("PUT", hWSPath+"/jobs/mine", job(hWSPath+"/codes/c/versions/"+d)).want(t, 201)
	otherData := []byte("team two's code")
	h.putBlob(other, digestOf(otherData), ws2, otherData).want(t, 204)
	h.do("PUT", hWSPath+"/jobs/theirs", job(hWSPath+"/codes/c/versions/"+digestOf(otherData))).want(t, 400, api.CodeValidationError)
}

// A blob no job references is collected a grace period after its last
// upload; a referenced one stays, and a fresh upload restarts the grace.
func TestBlobGarbageCollection(t *testing.T) {
	fc := clock.NewFake(time.Now())
	const grace = time.Hour
	h := newHarness(t, harnessOpts{clock: fc, config: func(c *server.Config) { c.BlobGrace = grace }})
	up := func(s string) string {
		d := digestOf([]byte(s))
		h.putBlob(h.token, d, hWSPath, []byte(s)).want(t, 204)
		return d
	}
	collect := func() int {
		t.Helper()
		n, err := h.srv.CollectBlobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	unused, used, renewed := up("unused"), up("used"), up("renewed")
	h.create("cpu", computeBody())
	h.do("PUT", hWSPath+"/jobs/j", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true",
		"computeId": computePath("cpu"), "codeId": hWSPath + "/codes/c/versions/" + used}}).want(t, 201)
	if n := collect(); n != 0 {
		t.Fatalf("collected %d blobs inside the grace period", n)
	}
	fc.Step(grace / 2)
	up("renewed")
	fc.Step(grace/2 + time.Minute)
	if n := collect(); n != 1 {
		t.Fatalf("collected %d blobs, want 1 (the unused one)", n)
	}
	h.do("GET", blobPath(unused, hWSPath), nil).want(t, 404)
	h.do("GET", blobPath(used, hWSPath), nil).want(t, 200)
	h.do("GET", blobPath(renewed, hWSPath), nil).want(t, 200)
	if es := h.auditOf(hWSPath + "/blobs/" + unused); len(es) != 2 || es[1].Principal != "cumulus" ||
		es[1].Operation != "Microsoft.MachineLearningServices/workspaces/blobs/delete" {
		t.Errorf("collection not audited: %+v", es)
	}
	// Once its job is deleted, the used blob goes too.
	h.do("DELETE", hWSPath+"/jobs/j", nil).want(t, 409) // still queued
	fc.Step(grace)
	if n := collect(); n != 1 {
		t.Fatalf("collected %d blobs, want 1 (renewed)", n)
	}
	h.do("GET", blobPath(used, hWSPath), nil).want(t, 200)
}

// A node reads a blob only while it runs a job that uses it, and only a
// blob of that job's workspace; every refusal is the same 404.
func TestNodeReadsOnlyItsJobsBlobs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	ws2 := wsPath(hRG, "ws2")
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	up := func(ws, s string) string {
		d := digestOf([]byte(s))
		h.putBlob(h.token, d, ws, []byte(s)).want(t, 204)
		return d
	}
	used, unused, elsewhere := up(hWSPath, "used"), up(hWSPath, "unused"), up(ws2, "elsewhere")
	h.create("cpu", computeBody())
	h.do("PUT", hWSPath+"/jobs/j", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true",
		"computeId": computePath("cpu"), "codeId": hWSPath + "/codes/c/versions/" + used}}).want(t, 201)
	tok := hardRegisterNode(t, h.url, h.db, "n1")
	get := func(digest string) *resp {
		t.Helper()
		return h.raw("GET", "/cumulus/v1/blobs/"+digest, nil, "Authorization", "Bearer "+tok)
	}
	get(used).want(t, 404) // no job yet

	// The scheduler gives the job to the node.
	j, err := store.GetJob(ctx, h.db.Q(), hWSPath, "j")
	if err != nil {
		t.Fatal(err)
	}
	j.Nodes = []string{"n1"}
	if err := store.UpdateJob(ctx, h.db.W(), &j); err != nil {
		t.Fatal(err)
	}
	n, err := store.GetNode(ctx, h.db.Q(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	n.JobID, n.State = j.UID, api.NodeRunning
	if err := store.PutNode(ctx, h.db.W(), n); err != nil {
		t.Fatal(err)
	}
	if r := get(used).want(t, 200); string(r.Body) != "used" {
		t.Errorf("the job's code: %q", r.Body)
	}
	get(unused).want(t, 404)
	get(elsewhere).want(t, 404)
	// A user token cannot stand in for the node: it reads by workspace.
	h.do("GET", "/cumulus/v1/blobs/"+elsewhere, nil).want(t, 400)
}

// The collector runs at start and then every quarter of the grace period
// on the server's clock.
func TestBlobGCLoop(t *testing.T) {
	fc := clock.NewFake(time.Now())
	h := newHarness(t, harnessOpts{clock: fc, config: func(c *server.Config) { c.BlobGrace = time.Hour }})
	d := digestOf([]byte("x"))
	h.putBlob(h.token, d, hWSPath, []byte("x")).want(t, 204)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.srv.RunBlobGC(ctx) }()
	defer func() { cancel(); <-done }()
	if err := fc.BlockUntil(ctx, 1); err != nil { // the first pass is done and waits
		t.Fatal(err)
	}
	h.do("GET", blobPath(d, hWSPath), nil).want(t, 200)
	for i := range 4 { // a pass every 15 minutes: the fourth is past the grace period
		if i > 0 {
			h.do("GET", blobPath(d, hWSPath), nil).want(t, 200)
		}
		fc.Step(15*time.Minute + time.Second)
		if err := fc.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	h.do("GET", blobPath(d, hWSPath), nil).want(t, 404)
}
