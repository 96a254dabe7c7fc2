package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// trackingTokens submits command jobs and returns their MLflow tokens.
func (h *harness) trackingTokens(names ...string) map[string]string {
	h.t.Helper()
	box, err := secret.LoadOrCreateKey(filepath.Join(h.dir, "secret.key"))
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range names {
		h.do("PUT", hWSPath+"/jobs/"+name, jobBody("cpu")).want(h.t, 201)
		j, err := store.GetJob(context.Background(), h.db.Q(), strings.ToLower(hWSPath), name)
		if err != nil {
			h.t.Fatal(err)
		}
		out[name] = server.TrackingToken(box, j.UID)
	}
	return out
}

// tags is a log-batch body of n tags of size bytes each, named from.
func tags(run string, from, n, size int) map[string]any {
	var ts []map[string]any
	for i := range n {
		ts = append(ts, map[string]any{"key": fmt.Sprintf("t%05d", from+i), "value": strings.Repeat("x", size)})
	}
	return map[string]any{"run_id": run, "tags": ts}
}

// TestMLflowRunDataBounded: a job cannot grow the database without bound
// through MLflow tags and params: past its workspace's run data limit and
// past a job's count of tags its calls are RESOURCE_LIMIT_EXCEEDED and
// store nothing, while other jobs of other workspaces are not touched.
// (Before, 60 batches of 100 tags of 8,000 bytes were all stored.)
func TestMLflowRunDataBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.Limits.WorkspaceRunData = 600 << 10 }})
	h.create("cpu", computeBody())
	tok := h.trackingTokens("a", "b")
	status := func(st int, out map[string]any) string {
		if st == 200 {
			return "200"
		}
		return fmt.Sprintf("%d %v", st, out["error_code"])
	}
	runBytes := func(name string) int64 {
		t.Helper()
		j, err := store.GetJob(context.Background(), h.db.Q(), strings.ToLower(hWSPath), name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := store.RunBytes(context.Background(), h.db.Q(), j.UID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// 100 tags of 8,000 bytes: 800 KB, past the workspace's 600 KiB.
	if got := status(h.mlflowCall(tok["a"], "POST", "runs/log-batch", tags("a", 0, 100, 8000))); got != "400 RESOURCE_LIMIT_EXCEEDED" {
		t.Fatalf("a batch past the workspace's limit: %s", got)
	}
	if n := runBytes("a"); n != 0 {
		t.Errorf("the refused batch stored %d bytes", n)
	}
	if got := status(h.mlflowCall(tok["a"], "POST", "runs/log-batch", tags("a", 0, 50, 8000))); got != "200" {
		t.Fatalf("a batch within the limit: %s", got)
	}
	// The workspace's other job gets the rest, and no more.
	if got := status(h.mlflowCall(tok["b"], "POST", "runs/log-batch", tags("b", 0, 50, 8000))); got != "400 RESOURCE_LIMIT_EXCEEDED" {
		t.Fatalf("b past the workspace's limit: %s", got)
	}
	if got := status(h.mlflowCall(tok["b"], "POST", "runs/log-metric", map[string]any{"run_id": "b", "key": "loss", "value": 1})); got != "200" {
		t.Fatalf("a metric of b within the limit: %s", got)
	}
	// Replacing a tag's value counts the new value, not both.
	if got := status(h.mlflowCall(tok["a"], "POST", "runs/log-batch", tags("a", 0, 50, 8000))); got != "200" {
		t.Fatalf("the same tags again: %s", got)
	}
	if n := runBytes("a"); n != 50*(6+8000) {
		t.Errorf("job a keeps %d bytes of run data, want %d", n, 50*(6+8000))
	}

	// A job's count of tags and params is bounded too.
	defer func(t, p int) { store.MaxTags, store.MaxParams = t, p }(store.MaxTags, store.MaxParams)
	store.MaxTags, store.MaxParams = 60, 3
	if got := status(h.mlflowCall(tok["a"], "POST", "runs/log-batch", tags("a", 50, 11, 1))); got != "400 RESOURCE_LIMIT_EXCEEDED" {
		t.Errorf("tags past a job's count: %s", got)
	}
	if got := status(h.mlflowCall(tok["a"], "POST", "runs/log-batch", tags("a", 50, 10, 1))); got != "200" {
		t.Errorf("tags up to a job's count: %s", got)
	}
	params := map[string]any{"run_id": "b", "params": []map[string]any{{"key": "p1", "value": "1"}, {"key": "p2", "value": "2"}, {"key": "p3", "value": "3"}, {"key": "p4", "value": "4"}}}
	if got := status(h.mlflowCall(tok["b"], "POST", "runs/log-batch", params)); got != "400 RESOURCE_LIMIT_EXCEEDED" {
		t.Errorf("params past a job's count: %s", got)
	}
	var m struct{ Tags map[string]string }
	h.do("GET", hWSPath+"/jobs/a/metrics", nil).want(t, 200).json(t, &m)
	if len(m.Tags) != 60 {
		t.Errorf("job a keeps %d tags, want 60", len(m.Tags))
	}
}

// TestWorkspaceBlobsBounded: a workspace's blobs add up to at most
// Limits.WorkspaceBlobs: an upload past it is 409 QuotaExceeded and
// stores nothing, uploading an owned blob again does not count it twice,
// and another workspace has its own room.
func TestWorkspaceBlobsBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.Limits.WorkspaceBlobs = 1000 }})
	ws2 := wsPath(hRG, "ws2")
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	one, two := []byte(strings.Repeat("1", 600)), []byte(strings.Repeat("2", 600))
	h.putBlob(h.token, digestOf(one), hWSPath, one).want(t, 204)
	h.putBlob(h.token, digestOf(two), hWSPath, two).want(t, 409, "QuotaExceeded")
	h.raw("GET", blobPath(digestOf(two), hWSPath), nil, "Authorization", "Bearer "+h.token).want(t, 404)
	h.putBlob(h.token, digestOf(one), hWSPath, one).want(t, 204)
	h.putBlob(h.token, digestOf(two), ws2, two).want(t, 204)
}
