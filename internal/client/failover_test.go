package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/freeport"
)

// deadURL is the address of a listener that was closed: nothing answers
// there, so a dial is refused.
func deadURL(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// hosts records the host of every attempt the client's transport makes.
type hosts struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (h *hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, "http://"+r.URL.Host)
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

func (h *hosts) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.seen
	h.seen = nil
	return s
}

// newTestClient is a client of servers whose transport records attempts.
func newTestClient(t *testing.T, servers ...string) (*Client, *hosts) {
	t.Helper()
	c, err := New(config.CLI{Server: strings.Join(servers, ","), Token: "tok", Subscription: "s", ResourceGroup: "g", Workspace: "w"})
	if err != nil {
		t.Fatal(err)
	}
	h := &hosts{next: c.HTTP.Transport}
	c.HTTP.Transport = h
	return c, h
}

func equal(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") }

func TestFailsOverFromADeadServerAndSticks(t *testing.T) {
	var calls atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"name":"x"}`))
	}))
	defer live.Close()
	dead := deadURL(t)
	c, h := newTestClient(t, dead, live.URL)
	ctx := context.Background()

	var out struct{ Name string }
	if _, err := c.Do(ctx, http.MethodGet, "/a", nil, &out); err != nil || out.Name != "x" {
		t.Fatalf("GET through [dead, live] = %+v, %v; want the live server's answer", out, err)
	}
	if got := h.take(); !equal(got, []string{dead, live.URL}) {
		t.Errorf("first request tried %v; want the dead server, then the live one", got)
	}
	// A POST is safe to move on from a refused dial too, and the live server
	// is now tried first: no attempt goes to the dead one.
	if _, err := c.Do(ctx, http.MethodPost, "/b", map[string]int{"n": 1}, nil); err != nil {
		t.Fatalf("POST = %v", err)
	}
	if got := h.take(); !equal(got, []string{live.URL}) {
		t.Errorf("second request tried %v; want the live server alone", got)
	}
	if c.Server() != live.URL {
		t.Errorf("Server() = %q; want %q", c.Server(), live.URL)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the live server saw %d requests; want 2", n)
	}
}

// hangUp is a server that reads a request and closes the connection
// without answering: the request arrived, the answer never came.
func hangUp(t *testing.T, got *atomic.Int32) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(s.Close)
	return s
}

func TestPostIsNotReplayedAfterTheServerGotIt(t *testing.T) {
	var first, second atomic.Int32
	a := hangUp(t, &first)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		second.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer b.Close()
	c, _ := newTestClient(t, a.URL, b.URL)

	if _, err := c.Do(context.Background(), http.MethodPost, "/jobs", map[string]string{"cmd": "train"}, nil); err == nil {
		t.Fatal("POST to a server that hung up = nil error; want the error, not a replay elsewhere")
	}
	if n1, n2 := first.Load(), second.Load(); n1 != 1 || n2 != 0 {
		t.Errorf("servers saw %d and %d POSTs; want exactly 1 and 0", n1, n2)
	}

	// A PUT is idempotent: the same failure moves it to the next server,
	// body and all.
	var out map[string]any
	if _, err := c.Do(context.Background(), http.MethodPut, "/jobs/x", map[string]string{"cmd": "train"}, &out); err != nil {
		t.Fatalf("PUT = %v; want it answered by the second server", err)
	}
	if n2 := second.Load(); n2 != 1 {
		t.Errorf("the second server saw %d PUTs; want 1", n2)
	}
}

func TestGatewayErrorFailsOverIdempotentRequests(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream gone", http.StatusBadGateway)
	}))
	defer proxy.Close()
	var bodies []string
	var mu sync.Mutex
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+string(b[:n]))
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	defer live.Close()
	c, h := newTestClient(t, proxy.URL, live.URL)
	ctx := context.Background()

	if _, err := c.UploadBlob(ctx, []byte("blob bytes")); err != nil {
		t.Fatalf("UploadBlob through [502, live] = %v", err)
	}
	if got := h.take(); !equal(got, []string{proxy.URL, live.URL}) {
		t.Errorf("upload tried %v; want the proxy, then the live server", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || bodies[0] != "PUT blob bytes" {
		t.Errorf("live server got %q; want the whole body once", bodies)
	}

	// A POST that a gateway refused is not sent again: it may have gone
	// through.
	c2, h2 := newTestClient(t, proxy.URL, live.URL)
	if _, err := c2.Do(ctx, http.MethodPost, "/x", map[string]int{}, nil); err == nil || !strings.Contains(err.Error(), "502") && !strings.Contains(err.Error(), "Gateway") {
		t.Errorf("POST through a 502 = %v; want the 502", err)
	}
	if got := h2.take(); !equal(got, []string{proxy.URL}) {
		t.Errorf("POST tried %v; want the proxy alone", got)
	}
}

func TestLinksOfAReplicaFailOver(t *testing.T) {
	var dead string
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page1" {
			// The link names the replica that is about to die.
			w.Write([]byte(`{"value":[1],"nextLink":"` + dead + `/page2?x=1"}`))
			return
		}
		w.Write([]byte(`{"value":[2]}`))
	}))
	defer live.Close()
	dead = deadURL(t)
	c, _ := newTestClient(t, live.URL, dead)
	got, err := ListAll[int](context.Background(), c, http.MethodGet, "/page1")
	if err != nil || len(got) != 2 {
		t.Fatalf("ListAll = %v, %v; want both pages, the second from the live replica", got, err)
	}
}

func TestNewParsesTheServerList(t *testing.T) {
	c, err := New(config.CLI{Server: " https://a:8787/ , https://b:8787,https://a:8787"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Servers.URLs(); !equal(got, []string{"https://a:8787", "https://b:8787"}) {
		t.Errorf("servers = %v", got)
	}
	if c.BaseURL != "https://a:8787" {
		t.Errorf("BaseURL = %q; want the first server", c.BaseURL)
	}
	if _, err := New(config.CLI{Server: "https://a:8787,b:8787"}); err == nil {
		t.Error("a list with a non-URL entry was accepted")
	}
}
