package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// hardServer is the real API with short body and poll timeouts, on a
// real listener (read deadlines need a real connection).
type hardServer struct {
	ts    *httptest.Server
	db    *store.DB
	token string
}

func newHardServer(t *testing.T, body, poll time.Duration) *hardServer {
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
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.Config{Defaults: server.Defaults{Subscription: hSub, ResourceGroup: hRG, Location: hLoc, Workspace: hWS},
		DataDir: dir, BodyTimeout: body, PollTimeout: poll}
	srv := server.New(cfg, server.Deps{DB: db, Box: box, Clock: clock.Real{}, Log: log})
	if err := srv.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := server.EnsureAdminToken(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		db.Close()
	})
	return &hardServer{ts: ts, db: db, token: tok}
}

// stalledRequest sends head and the first bytes of a body on a raw connection,
// sends nothing more, and returns what the server answered until it
// closed the connection, and how long that took.
func stalledRequest(t *testing.T, addr, head string, body []byte) (string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	// A safety net only: the server is to close the connection long before.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close a connection whose body stalled: %v (read %q)", err, got)
	}
	return string(got), time.Since(start)
}

func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	s := newHardServer(t, bound, time.Second)
	addr := s.ts.Listener.Addr().String()
	head := "PUT " + withVersion(wsPath(hRG, "slow")) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.token +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
	got, took := stalledRequest(t, addr, head, []byte(`{"location":`))
	if took > bound+2*time.Second {
		t.Errorf("the connection was closed after %s; want about %s", took, bound)
	}
	if !strings.HasPrefix(got, "HTTP/1.1 408") || !strings.Contains(got, `"code":"RequestTimeout"`) {
		t.Errorf("answer to a stalled body:\n%s", got)
	}
	// Nothing was created.
	req, _ := http.NewRequest("GET", s.ts.URL+withVersion(wsPath(hRG, "slow")), nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET the workspace of the stalled PUT: %d; want 404", res.StatusCode)
	}
}

func TestSlowUploadIsCutOffOnlyWhenItStalls(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	s := newHardServer(t, bound, time.Second)
	addr := s.ts.Listener.Addr().String()
	data := bytes.Repeat([]byte("cumulus "), 8)
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	head := fmt.Sprintf("PUT %s/%s?workspace=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		agentapi.BlobPrefix, digest, hWSPath, s.token, len(data))

	// An upload that keeps sending may take longer than the bound in all.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < len(data); i += 8 {
		if _, err := c.Write(data[i : i+8]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(bound / 4) // a trickling client on a real connection
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("an upload that kept sending for %s (bound %s): %d; want 204", time.Since(start), bound, res.StatusCode)
	}

	// One that stops sending is cut off (another blob: a stored one is
	// not read again).
	other := bytes.Repeat([]byte("stalled "), 8)
	sum = sha256.Sum256(other)
	head = fmt.Sprintf("PUT %s/%s?workspace=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		agentapi.BlobPrefix, hex.EncodeToString(sum[:]), hWSPath, s.token, len(other))
	got, took := stalledRequest(t, addr, head, other[:8])
	if took > bound+2*time.Second || !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("a stalled upload: after %s:\n%s", took, got)
	}
}

// TestHeldPollOutlivesBodyTimeout: an agent's poll is held longer than
// the body timeout; its small body was read, so the hold is not cut off.
func TestHeldPollOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	const poll = 900 * time.Millisecond
	s := newHardServer(t, 200*time.Millisecond, poll)
	nodeToken := hardRegisterNode(t, s.ts.URL, s.db, "n1")
	start := time.Now()
	res := hardAgentPost(t, s.ts.URL, "/poll", nodeToken, agentapi.PollRequest{NodeID: "n1"})
	if res.Status != http.StatusOK {
		t.Fatalf("poll: %d %s", res.Status, res.Body)
	}
	var pr agentapi.PollResponse
	if err := json.Unmarshal(res.Body, &pr); err != nil {
		t.Fatalf("poll answer %q: %v", res.Body, err)
	}
	if took := time.Since(start); took < poll-100*time.Millisecond {
		t.Errorf("the poll was answered after %s; want it held about %s", took, poll)
	}
}

// hardRegisterNode makes a node record as a provider does and registers it
// with its join token; it returns the node token.
func hardRegisterNode(t *testing.T, base string, db *store.DB, id string) string {
	t.Helper()
	join, hash := dispatch.NewNodeJoinToken(id)
	n := store.Node{ID: id, Compute: computePath("c"), State: api.NodePreparing, VMSize: "Standard_DS3_v2", Provider: "test",
		JoinHash: hash, Created: time.Now()}
	if err := store.PutNode(context.Background(), db.W(), n); err != nil {
		t.Fatal(err)
	}
	res := hardAgentPost(t, base, "/register", join, agentapi.RegisterRequest{NodeID: id, Address: "127.0.0.1"})
	var rr agentapi.RegisterResponse
	if res.Status != http.StatusOK || json.Unmarshal(res.Body, &rr) != nil || rr.NodeToken == "" {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	return rr.NodeToken
}

func hardAgentPost(t *testing.T, base, path, token string, body any) *resp {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+agentapi.Prefix+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &resp{Status: res.StatusCode, Header: res.Header, Body: data}
}

func TestUnknownNodeAndWrongSecretLookTheSame(t *testing.T) {
	t.Parallel()
	s := newHardServer(t, time.Second, 50*time.Millisecond)
	base := s.ts.URL
	tok := hardRegisterNode(t, base, s.db, "n1")
	id, _, _ := strings.Cut(tok, ".")
	wrong := id + ".not-the-secret"
	unknown := strings.Replace(id, "n1", "n2", 1) + ".not-the-secret"
	a := hardAgentPost(t, base, "/poll", wrong, agentapi.PollRequest{})
	b := hardAgentPost(t, base, "/poll", unknown, agentapi.PollRequest{})
	if a.Status != http.StatusUnauthorized || b.Status != http.StatusUnauthorized || !bytes.Equal(a.Body, b.Body) {
		t.Errorf("wrong secret: %d %s\nunknown node: %d %s\nwant the same 401", a.Status, a.Body, b.Status, b.Body)
	}
	checkErrorShape(t, "poll", a)
	for _, path := range []string{"/jobs/x/events", "/leaving", "/ssh"} {
		a, b := hardAgentPost(t, base, path, wrong, agentapi.PollRequest{}), hardAgentPost(t, base, path, unknown, agentapi.PollRequest{})
		if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) {
			t.Errorf("%s: wrong secret: %d %s; unknown node: %d %s", path, a.Status, a.Body, b.Status, b.Body)
		}
	}
	if r := hardAgentPost(t, base, "/poll", tok, agentapi.PollRequest{}); r.Status != http.StatusOK {
		t.Errorf("poll with the node's own token: %d %s", r.Status, r.Body)
	}
}

func TestMalformedAuthorizationGetsARMError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, v := range []string{"Bearer", "Bearer ", "Bearer  ", "Basic x", "Basic", "bearer", "Bearer a b", "Token x",
		"Bearer " + strings.Repeat("x", 5000), "Bearer tok\xff", "Bearer\ttok", "Bearer cnt_n1"} {
		for _, path := range []string{withVersion(hWSPath), agentapi.Prefix + "/poll", agentapi.BlobPrefix + "/" + strings.Repeat("0", 64)} {
			method := http.MethodGet
			if strings.HasPrefix(path, agentapi.Prefix) {
				method = http.MethodPost
			}
			r := h.raw(method, path, nil, "Authorization", v)
			if r.Status != http.StatusUnauthorized || r.errCode(t) != api.CodeUnauthorized {
				t.Errorf("%s with Authorization %q: %d %s; want 401 %s", path, v, r.Status, r.Body, api.CodeUnauthorized)
			}
		}
	}
	// A control byte in a header never reaches Cumulus: net/http refuses
	// the request itself with a plain-text 400 (there is no hook to shape
	// it). It must be a 400 all the same, and the connection closed.
	got, _ := stalledRequest(t, h.ts.Listener.Addr().String(),
		"GET "+withVersion(hWSPath)+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x00\r\n\r\n", nil)
	if !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Errorf("Authorization with a NUL byte: %q", got)
	}
}

func TestNonObjectBodiesRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for i, body := range []string{"null", " null ", "[]", `[{"location":"westus2"}]`, "1", `"x"`, "true", ""} {
		name := fmt.Sprintf("nobody%d", i)
		r := h.do(http.MethodPut, wsPath(hRG, name), body)
		r.want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		h.do(http.MethodGet, wsPath(hRG, name), nil).want(t, http.StatusNotFound)
	}
	h.do(http.MethodPut, computePath("nullc"), "null").want(t, http.StatusBadRequest, api.CodeInvalidRequest)
}
