package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// runOn submits a job and gives it to node n1, as the scheduler would;
// it returns the job and the node's token.
func (h *harness) runOn(name string, body map[string]any) (store.Job, string) {
	h.t.Helper()
	ctx := context.Background()
	h.do("PUT", hWSPath+"/jobs/"+name, body).want(h.t, 201)
	tok := hardRegisterNode(h.t, h.url, h.db, "n1")
	j, err := store.GetJob(ctx, h.db.Q(), hWSPath, name)
	if err != nil {
		h.t.Fatal(err)
	}
	j.Nodes, j.Attempt = []string{"n1"}, 1
	if err := store.UpdateJob(ctx, h.db.W(), &j); err != nil {
		h.t.Fatal(err)
	}
	n, err := store.GetNode(ctx, h.db.Q(), "n1")
	if err != nil {
		h.t.Fatal(err)
	}
	n.JobID, n.State = j.UID, api.NodeRunning
	if err := store.PutNode(ctx, h.db.W(), n); err != nil {
		h.t.Fatal(err)
	}
	return j, tok
}

// tarOf packs files (name → content) as a folder archive.
func tarOf(t *testing.T, fs map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, content := range fs {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := files.Pack(&b, dir); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// listNames lists a container's blob names under prefix (admin SAS).
func (h *harness) listNames(datastore, prefix string) []string {
	h.t.Helper()
	c, sas := h.sasFor(h.token, hWSPath, datastore)
	r := h.blob("GET", c+"?restype=container&comp=list&prefix="+prefix+"&"+sas, nil).wantBlob(h.t, 200)
	var p struct {
		Blobs struct {
			Blob []struct {
				Name string `xml:"Name"`
			} `xml:"Blob"`
		} `xml:"Blobs"`
	}
	if err := xml.Unmarshal(r.Body, &p); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, b := range p.Blobs.Blob {
		out = append(out, b.Name)
	}
	sort.Strings(out)
	return out
}

// A node lists its job's code and inputs and reads their files, and no
// other file; what it uploads as an output is filed under the output's
// datastore path (the default output under the job's artifacts),
// replacing what was there.
func TestNodeReadsJobDataAndFilesOutputs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	h.upload("LocalUpload/x/data/", map[string]string{"a.txt": "A", "sub/b.txt": "B"})
	h.upload("LocalUpload/x/src/", map[string]string{"train.py": "print(1)"})
	h.upload("private/", map[string]string{"secret.txt": "S"})
	h.do("PUT", hWSPath+"/codes/c1/versions/1", map[string]any{"properties": map[string]any{"codeUri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/x/src"}}).want(t, 201)
	j, tok := h.runOn("j", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": computePath("cpu"),
		"codeId": hWSPath + "/codes/c1/versions/1",
		"inputs": map[string]any{
			"data": map[string]any{"jobInputType": "uri_folder", "uri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/x/data"},
			"one":  map[string]any{"jobInputType": "uri_file", "uri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/x/data/a.txt"}},
		"outputs": map[string]any{"out": map[string]any{"jobOutputType": "uri_folder"}}}})
	node := func(method, path string, body []byte) *resp {
		t.Helper()
		return h.raw(method, path, body, "Authorization", "Bearer "+tok)
	}
	list := func(path string) []agentapi.ListedFile {
		t.Helper()
		var l agentapi.FileList
		node("GET", agentapi.Prefix+"/jobs/"+j.UID+path, nil).want(t, 200).json(t, &l)
		return l.Files
	}
	if fs := list("/inputs/data/files"); len(fs) != 2 || fs[0].Path != "a.txt" || fs[0].Digest != sha("A") || fs[1].Path != "sub/b.txt" {
		t.Errorf("input files = %+v", fs)
	}
	if fs := list("/inputs/one/files"); len(fs) != 1 || fs[0].Path != "a.txt" {
		t.Errorf("file input = %+v", fs)
	}
	if fs := list("/code/files"); len(fs) != 1 || fs[0].Path != "train.py" {
		t.Errorf("code files = %+v", fs)
	}
	node("GET", agentapi.Prefix+"/jobs/"+j.UID+"/inputs/nope/files", nil).want(t, 404)
	if r := node("GET", agentapi.BlobPrefix+"/"+sha("B"), nil).want(t, 200); string(r.Body) != "B" {
		t.Errorf("input file = %q", r.Body)
	}
	node("GET", agentapi.BlobPrefix+"/"+sha("S"), nil).want(t, 404) // in the store, not the job's

	out := func(name, attempt string, fs map[string]string) {
		t.Helper()
		node("PUT", agentapi.Prefix+"/jobs/"+j.UID+"/outputs/"+name+"?attempt="+attempt, tarOf(t, fs)).want(t, 204)
	}
	out("out", "1", map[string]string{"total.txt": "3", "old.txt": "x"})
	out("out", "1", map[string]string{"total.txt": "4"})
	if got := h.listNames("workspaceblobstore", "azureml/j/out/"); strings.Join(got, ",") != "azureml/j/out/total.txt" {
		t.Errorf("filed output = %v", got)
	}
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	if r := h.blob("GET", c+"/azureml/j/out/total.txt?"+sas, nil).wantBlob(t, 200); string(r.Body) != "4" {
		t.Errorf("output file = %q", r.Body)
	}
	out("default", "1", map[string]string{"model.pkl": "m"})
	if got := h.listNames("workspaceartifactstore", "ExperimentRun/dcid.j/"); strings.Join(got, ",") != "ExperimentRun/dcid.j/outputs/model.pkl" {
		t.Errorf("artifacts = %v", got)
	}
}

// Run History answers a job's details with its log files, each a URL the
// SDK reads with no other credential; the discovery document is public;
// Run History itself needs a role.
func TestRunHistoryLogs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	j, tok := h.runOn("j", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": computePath("cpu")}})
	r := h.raw("POST", agentapi.Prefix+"/jobs/"+j.UID+"/logs?offset=0", []byte("line one\nline two\n"), "Authorization", "Bearer "+tok)
	r.want(t, 200)
	var d struct {
		RunID    string            `json:"runId"`
		Status   string            `json:"status"`
		LogFiles map[string]string `json:"logFiles"`
	}
	h.do("GET", "/history/v1.0"+hWSPath+"/runs/j/details", nil).want(t, 200).json(t, &d)
	u := d.LogFiles["user_logs/std_log.txt"]
	if d.RunID != "j" || d.Status != api.JobQueued || u == "" {
		t.Fatalf("details = %+v", d)
	}
	if r := h.blob("GET", u, nil).wantBlob(t, 200); string(r.Body) != "line one\nline two\n" {
		t.Errorf("log = %q", r.Body)
	}
	// The URL reads that log only.
	other := strings.Replace(u, "user_logs/std_log.txt", "outputs/x", 1)
	h.blob("GET", other, nil).wantBlob(t, 403, "AuthenticationFailed")
	nobody := h.user("nora", "", "")
	h.as(nobody, "GET", "/history/v1.0"+hWSPath+"/runs/j/details", nil).want(t, 403, api.CodeForbidden)
	h.as(nobody, "POST", "/history/v1.0"+hWSPath+"/rundata", map[string]any{"runId": "j"}).want(t, 403, api.CodeForbidden)
	h.do("GET", "/history/v1.0"+hWSPath+"/runs/nope/details", nil).want(t, 404)
}

// Blobs a path of a container names are kept by the collector; once no
// path names them, they go after the grace period.
func TestBlobPathsKeepTheirBlobs(t *testing.T) {
	fc := clock.NewFake(time.Now())
	const grace = time.Hour
	h := newHarness(t, harnessOpts{clock: fc, config: func(c *server.Config) { c.BlobGrace = grace }})
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	putBlock(h, c+"/kept.txt?"+sas, []byte("kept")).wantBlob(t, 201)
	putBlock(h, c+"/dropped.txt?"+sas, []byte("dropped")).wantBlob(t, 201)
	h.blob("DELETE", c+"/dropped.txt?"+sas, nil).wantBlob(t, 202)
	fc.Step(grace + time.Minute)
	c, sas = h.sasFor(h.token, hWSPath, "workspaceblobstore")
	if n, err := h.srv.CollectBlobs(context.Background()); err != nil || n != 1 {
		t.Fatalf("collected %d blobs (%v), want 1 (dropped.txt's)", n, err)
	}
	if r := h.blob("GET", c+"/kept.txt?"+sas, nil).wantBlob(t, 200); string(r.Body) != "kept" {
		t.Errorf("kept = %q", r.Body)
	}
}

// A node whose job left outputs empty uploads none of them and names them
// in its exit report: once the exit is taken, each is there to download,
// empty, as an empty upload would be. A name the job does not declare is
// left out, the exit taken all the same; a node that does not run the
// job stores nothing.
func TestExitReportFilesEmptyOutputs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	j, tok := h.runOn("j", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": computePath("cpu"),
		"outputs": map[string]any{"out": map[string]any{"jobOutputType": "uri_folder"}}}})
	// Attempt 1 saved a model (filed under the job's artifacts), then
	// attempt 2 started, on the same node, as the scheduler leaves a job
	// it gave a node (runOn gives no attempt).
	h.raw("PUT", agentapi.Prefix+"/jobs/"+j.UID+"/outputs/default?attempt=1", tarOf(t, map[string]string{"model.pkl": "m"}),
		"Authorization", "Bearer "+tok).want(t, 204)
	artifacts := "ExperimentRun/dcid.j/outputs/"
	if got := h.listNames("workspaceartifactstore", artifacts); len(got) != 1 {
		t.Fatalf("attempt 1's artifacts = %v", got)
	}
	ctx := context.Background()
	j, err := store.GetJobByUID(ctx, h.db.Q(), j.UID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	j.Attempt = 2
	j.Doc.Properties.Attempts = []api.Attempt{{Number: 1, Nodes: []string{"n1"}, Assigned: &now, Ended: &now}, {Number: 2, Nodes: []string{"n1"}, Assigned: &now}}
	j.Doc.SetStatus(api.JobPreparing, now, "")
	if err := store.UpdateJob(ctx, h.db.W(), &j); err != nil {
		t.Fatal(err)
	}
	exit := agentapi.JobEvent{Attempt: 2, Phase: agentapi.PhaseExited, EmptyOutputs: []string{"default", "out", "undeclared"}}
	events := agentapi.Prefix + "/jobs/" + j.UID + "/events"

	var got api.Job
	other := hardRegisterNode(t, h.url, h.db, "n2")
	h.raw("POST", events, exit, "Authorization", "Bearer "+other) // taken without effect
	h.do("GET", hWSPath+"/jobs/j/outputs/out", nil).want(t, 404)
	if got := h.listNames("workspaceartifactstore", artifacts); len(got) != 1 {
		t.Errorf("artifacts after another node's report = %v; want attempt 1's still", got)
	}
	if h.do("GET", hWSPath+"/jobs/j", nil).want(t, 200).json(t, &got); api.JobTerminal(got.Properties.Status) {
		t.Fatalf("job %s after another node's exit report", got.Properties.Status)
	}

	h.raw("POST", events, exit, "Authorization", "Bearer "+tok).want(t, 204)
	for _, name := range []string{"default", "out"} {
		r := h.do("GET", hWSPath+"/jobs/j/outputs/"+name, nil).want(t, 200)
		dir := t.TempDir()
		if err := files.Unpack(bytes.NewReader(r.Body), dir); err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("output %s holds %d entries, want none", name, len(ents))
		}
	}
	h.do("GET", hWSPath+"/jobs/j/outputs/undeclared", nil).want(t, 404)
	if got := h.listNames("workspaceartifactstore", artifacts); len(got) != 0 {
		t.Errorf("artifacts = %v; want none: the latest attempt's output is empty", got)
	}
	h.do("GET", hWSPath+"/jobs/j", nil).want(t, 200).json(t, &got)
	if got.Properties.Status != api.JobCompleted {
		t.Errorf("job status %s after its exit, want %s", got.Properties.Status, api.JobCompleted)
	}
	// Kept with the job, not as files: the server's folder of the job's
	// outputs holds attempt 1's upload alone.
	if ents, err := os.ReadDir(filepath.Join(h.dir, "outputs", j.UID)); err != nil || len(ents) != 1 || ents[0].Name() != "default" {
		t.Errorf("the job's output folders: %v, %v; want attempt 1's default alone", ents, err)
	}
}
