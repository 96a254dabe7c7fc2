package security

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
)

// Smaller holes: slow bodies, malformed Authorization headers, a node-id
// oracle in the agent protocol, data files readable by others, and input
// that validation let through to run time.

// sendRaw sends one request on its own connection and returns the answer up
// to the server closing the connection (requests here ask it to close).
func (s *server) sendRaw(t *testing.T, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second)) // a safety net; the server closes first
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the connection: %v (read %q)", err, got)
	}
	return string(got)
}

// sendAuth sends an HTTP request with a bearer token (or the Authorization
// header given) and returns the status and body.
func (s *server) sendAuth(t *testing.T, method, path, auth string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, data
}

// armErrCode returns the ARM error code of body, or fails.
func armErrCode(t *testing.T, what string, body []byte) string {
	t.Helper()
	var er api.ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil || er.Error == nil || er.Error.Code == "" || er.Error.Message == "" {
		t.Errorf("%s: not an ARM error: %q", what, body)
		return ""
	}
	return er.Error.Code
}

func workspaceURL(s *server, name string) string {
	return "/subscriptions/" + s.admin.Scope.Subscription + "/resourceGroups/" + s.admin.Scope.ResourceGroup +
		"/providers/Microsoft.MachineLearningServices/workspaces/" + name + "?api-version=2024-04-01"
}

// TestSlowBodyIsCutOff: a client that sends its headers and part of its
// body, then nothing, is answered 408 and its connection closed within
// --body-timeout (before, it held a connection and a handler forever).
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	const bound = 500 * time.Millisecond
	s := startServer(t, "--body-timeout", bound.String())
	start := time.Now()
	got := s.sendRaw(t, "PUT "+workspaceURL(s, "slowloris")+" HTTP/1.1\r\nHost: "+s.addr+"\r\nAuthorization: Bearer "+s.admin.Token+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"location\":")
	if took := time.Since(start); took > bound+3*time.Second {
		t.Errorf("the stalled request was cut off after %s; want about %s", took, bound)
	}
	if !strings.HasPrefix(got, "HTTP/1.1 408") || !strings.Contains(got, `"code":"RequestTimeout"`) {
		t.Errorf("answer to a stalled body:\n%s", got)
	}
	if _, err := s.admin.GetWorkspace(bctx, "slowloris"); err == nil {
		t.Error("the stalled PUT created its workspace")
	}
	// The API still serves, and an ordinary upload still goes through.
	if _, err := s.admin.UploadBlob(bctx, bytes.Repeat([]byte("data "), 1<<16)); err != nil {
		t.Errorf("upload after the cut: %v", err)
	}
}

// TestMalformedAuthorizationGetsARMError: every malformed Authorization
// header that reaches Cumulus is a 401 AuthenticationFailed in the ARM
// error shape, on the API, the agent protocol and blobs alike.
//
// A header value with a control byte (Authorization: Bearer \x00) does
// not reach Cumulus: Go's net/http refuses the request while parsing it,
// with its own plain-text "400 Bad Request: invalid header value" and a
// closed connection, before any handler runs; net/http has no hook to
// shape that answer. The test pins that it stays a 400.
func TestMalformedAuthorizationGetsARMError(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	paths := map[string]string{
		workspaceURL(s, "default"):                          http.MethodGet,
		agentapi.Prefix + "/poll":                           http.MethodPost,
		agentapi.Prefix + "/register":                       http.MethodPost,
		agentapi.BlobPrefix + "/" + strings.Repeat("a", 64): http.MethodGet,
	}
	for _, auth := range []string{"Bearer", "Bearer ", "Basic x", "Basic dXNlcjpwYXNz", "bearer", "Bearer a b", "Token abc",
		"Bearer " + strings.Repeat("x", 8000), "Bearer tok\xff", "Bearer\tcml_x", "Bearer cnt_x", "Bearer cjt_"} {
		for path, method := range paths {
			status, body := s.sendAuth(t, method, path, auth, []byte("{}"))
			if status != http.StatusUnauthorized || armErrCode(t, path, body) != api.CodeUnauthorized {
				t.Errorf("%s %s with Authorization %.30q: %d %s; want 401 %s", method, path, auth, status, body, api.CodeUnauthorized)
			}
		}
	}
	got := s.sendRaw(t, "GET "+workspaceURL(s, "default")+" HTTP/1.1\r\nHost: "+s.addr+"\r\nAuthorization: Bearer \x00\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Errorf("Authorization with a NUL byte: %q; want net/http's 400", got)
	}
}

// TestUnknownNodeAndWrongSecretLookTheSame: polling as a node id that
// does not exist answered 200 {"unknown":true}, and a wrong secret for
// one that does 401: anyone could tell which node ids exist. Both are now
// the same 401, word for word.
func TestUnknownNodeAndWrongSecretLookTheSame(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	compute(t, s.admin, "cpu", 1)
	join, _, err := s.admin.JoinToken(bctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	// A machine joins by hand: a real node record with a real token.
	reg, _ := json.Marshal(agentapi.RegisterRequest{Hostname: "m1", Address: "127.0.0.1"})
	status, body := s.sendAuth(t, http.MethodPost, agentapi.Prefix+"/register", "Bearer "+join, reg)
	var rr agentapi.RegisterResponse
	if status != http.StatusOK || json.Unmarshal(body, &rr) != nil || rr.NodeToken == "" {
		t.Fatalf("register: %d %s", status, body)
	}
	known, _, _ := strings.Cut(rr.NodeToken, ".")
	unknown := "cnt_tvm-cpu-00000000_20200101t000000z"
	poll, _ := json.Marshal(agentapi.PollRequest{})
	for _, path := range []string{"/poll", "/leaving", "/ssh", "/jobs/x/events"} {
		ws, wb := s.sendAuth(t, http.MethodPost, agentapi.Prefix+path, "Bearer "+known+".wrong-secret", poll)
		us, ub := s.sendAuth(t, http.MethodPost, agentapi.Prefix+path, "Bearer "+unknown+".wrong-secret", poll)
		if ws != http.StatusUnauthorized || us != ws || !bytes.Equal(wb, ub) {
			t.Errorf("%s: known node, wrong secret: %d %s\nunknown node: %d %s\nwant the same 401", path, ws, wb, us, ub)
		}
		armErrCode(t, path, ub)
	}
	// The node's own token works (ssh reports answer at once; a poll is held).
	if status, body := s.sendAuth(t, http.MethodPost, agentapi.Prefix+"/ssh", "Bearer "+rr.NodeToken, poll); status != http.StatusNoContent {
		t.Errorf("ssh report with the node's token: %d %s", status, body)
	}
}

// TestDataDirPermissionsFixed: the database was created 0644. Now the
// data dir is 0700 and its files 0600 on a fresh start, and a data dir
// made beforehand with open modes (or left by an older version) is
// tightened at start, with a warning naming each path fixed.
func TestDataDirPermissionsFixed(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	private := []string{"cumulus.db", "cumulus.db-wal", "cumulus.db-shm", "secret.key", "config.yaml"}
	checkPrivate := func(when string) {
		t.Helper()
		for _, name := range append([]string{"."}, private...) {
			fi, err := os.Stat(filepath.Join(s.dataDir, name))
			if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(name, "cumulus.db-") {
				continue // SQLite removes them at a clean close
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode().Perm(); m&0o077 != 0 {
				t.Errorf("%s: %s has mode %04o; want no access for group and others", when, name, m)
			}
		}
	}
	checkPrivate("fresh start")

	s.stop()
	loosen := map[string]fs.FileMode{".": 0o755, "logs": 0o755, "blobs": 0o775}
	for _, name := range private {
		loosen[name] = 0o644
	}
	for name, mode := range loosen {
		p := filepath.Join(s.dataDir, name)
		if mode&0o100 != 0 {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		} else if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	s.start()
	checkPrivate("restart")
	for _, name := range []string{"logs", "blobs"} {
		if fi, err := os.Stat(filepath.Join(s.dataDir, name)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s after restart: %v %v; want 0700", name, fi.Mode(), err)
		}
	}
	log, err := os.ReadFile(filepath.Join(s.dataDir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret.key", "config.yaml", "cumulus.db", "logs", "blobs"} {
		if !strings.Contains(string(log), "took group and other access away") || !strings.Contains(string(log), filepath.Join(s.dataDir, name)) {
			t.Errorf("the server log does not warn that it fixed %s", name)
		}
	}
}

// TestNullWorkspaceBodyRefused: a workspace PUT whose body is null (or
// another JSON value that is not an object) was taken as an empty
// workspace and created it. It is a 400 now, and nothing is created.
func TestNullWorkspaceBodyRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for i, body := range []string{"null", "[]", "1", `"ws"`, "true", ""} {
		name := "nullws" + string(rune('a'+i))
		status, got := s.sendAuth(t, http.MethodPut, workspaceURL(s, name), "Bearer "+s.admin.Token, []byte(body))
		if status != http.StatusBadRequest || armErrCode(t, body, got) != api.CodeInvalidRequest {
			t.Errorf("PUT workspace with body %q: %d %s; want 400 %s", body, status, got, api.CodeInvalidRequest)
		}
		if _, err := s.admin.GetWorkspace(bctx, name); err == nil {
			t.Errorf("PUT workspace with body %q created it", body)
		}
	}
}

// TestBadImageReferencesRefused: an environment's image went to the
// container engine's command line as given: "-rm" is an option there,
// "../x" a path. Image references are checked against Docker's grammar
// when an environment or a job is submitted.
func TestBadImageReferencesRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	compute(t, s.admin, "cpu", 1)
	for _, image := range []string{"-rm", "--privileged", "../x", "a b", "Ubuntu:22.04", "Library/python", "img@sha256:abc", "x:tag with space"} {
		_, err := s.admin.PutEnvironment(bctx, "env", "1", api.Environment{Properties: api.EnvironmentProperties{Image: image}})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("environment image %q: %v; want 400", image, err)
		}
		j := api.Job{Name: "img", Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "true",
			ComputeID: s.admin.Scope.ComputeID("cpu"), EnvironmentID: "image:" + image}}
		if _, err := s.admin.PutJob(bctx, j); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("job with inline image %q: %v; want 400", image, err)
		}
	}
	for i, image := range []string{"python:3.11", "ghcr.io/org/img:tag", "localhost:5000/x@sha256:" + strings.Repeat("0a", 32), "busybox"} {
		if _, err := s.admin.PutEnvironment(bctx, "ok", string(rune('1'+i)), api.Environment{Properties: api.EnvironmentProperties{Image: image}}); err != nil {
			t.Errorf("environment image %q: %v", image, err)
		}
	}
}

// TestBlobURIPathTraversalRefused: a job input cumulus://blobs/../../config.yaml
// was taken at submit and failed (or worse) on the node at run time. Any
// cumulus:// input that is not exactly cumulus://blobs/<sha256> is now
// refused at submit, and no job is made.
func TestBlobURIPathTraversalRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	compute(t, s.admin, "cpu", 1)
	digest, err := s.admin.UploadBlob(bctx, []byte("not really an archive"))
	if err != nil {
		t.Fatal(err)
	}
	for i, uri := range []string{"cumulus://blobs/../../config.yaml", "cumulus://blobs/../../../etc/passwd", "cumulus://blobs/" + digest + "/../../secret.key",
		"cumulus://blobs/" + strings.ToUpper(digest), "cumulus://blobs/" + digest + "?x", "cumulus://blobs/", "cumulus://logs/" + digest, "CUMULUS://blobs/x"} {
		name := "trav" + string(rune('a'+i))
		j := api.Job{Name: name, Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "ls ${{inputs.data}}",
			ComputeID: s.admin.Scope.ComputeID("cpu"), Inputs: map[string]api.JobInput{"data": {JobInputType: "uri_folder", URI: uri}}}}
		_, err := s.admin.PutJob(bctx, j)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("input %q: %v; want 400 at submit", uri, err)
		}
		if _, err := s.admin.GetJob(bctx, name); err == nil {
			t.Errorf("input %q: the job was made", uri)
		}
	}
}
