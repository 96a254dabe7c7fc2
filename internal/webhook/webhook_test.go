package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr  string
		allow []netip.Prefix
		ok    bool
	}{
		{"127.0.0.1", nil, false},
		{"127.8.9.10", nil, false},
		{"::1", nil, false},
		{"::ffff:127.0.0.1", nil, false},
		{"0.0.0.0", nil, false},
		{"::", nil, false},
		{"169.254.169.254", nil, false},
		{"fd00:ec2::254", nil, false},
		{"fe80::1", nil, false},
		{"10.1.2.3", nil, false},
		{"172.16.0.1", nil, false},
		{"172.31.255.255", nil, false},
		{"192.168.1.1", nil, false},
		{"100.64.0.1", nil, false},
		{"64:ff9b::7f00:1", nil, false},
		{"2002:7f00:1::", nil, false},
		{"224.0.0.1", nil, false},
		{"255.255.255.255", nil, false},
		{"8.8.8.8", nil, true},
		{"172.32.0.1", nil, true},
		{"2606:4700::1111", nil, true},
		{"127.0.0.1", loopback, true},
		{"::ffff:127.0.0.1", loopback, true},
		{"::1", loopback, false},
		{"10.1.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, true},
		{"10.2.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, false},
	} {
		err := Policy{Allow: c.allow}.CheckAddr(netip.MustParseAddr(c.addr))
		if (err == nil) != c.ok {
			t.Errorf("%s allowing %v: %v; want allowed %v", c.addr, c.allow, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v is not ErrRefused", c.addr, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/budget", true},
		{"http://8.8.8.8:8080/x", true},
		{"http://127.0.0.1:8787/x", false},
		{"http://localhost:8787/x", false},
		{"http://LOCALHOST./x", false},
		{"http://api.localhost/x", false},
		{"http://[::1]:80/", false},
		{"http://[::ffff:127.0.0.1]:80/", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://0.0.0.0:8787/", false},
		{"http://user:secret@hooks.example.com/", false},
		{"http://user@hooks.example.com/", false},
		{"ftp://hooks.example.com/", false},
		{"http:///path", false},
	} {
		if err := (Policy{}).CheckURL(c.url); (err == nil) != c.ok {
			t.Errorf("%s: %v; want allowed %v", c.url, err, c.ok)
		}
	}
	if err := (Policy{Allow: loopback}).CheckURL("http://localhost:8787/x"); err != nil {
		t.Errorf("localhost with loopback allowed: %v", err)
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow([]string{"10.0.0.0/8", " 127.0.0.1 ", "fd00::/8", "", "::ffff:10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "10.0.0.1/32"}
	if len(got) != len(want) {
		t.Fatalf("ParseAllow = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("range %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "::ffff:10.0.0.0/104"} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

// listener is a loopback HTTP server that counts its requests.
func listener(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

// The client checks the address it dials, not the name: localhost, an
// IPv4-mapped loopback address and the listener's own address are
// refused with the default policy, and nothing reaches the listener.
func TestClientRefusesLoopbackWhenDialled(t *testing.T) {
	ts, hits := listener(t, func(w http.ResponseWriter, r *http.Request) {})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	c := Policy{}.Client()
	for _, u := range []string{ts.URL, "http://localhost:" + port + "/x", "http://[::ffff:127.0.0.1]:" + port + "/x"} {
		err := Post(context.Background(), c, u, []byte(`{}`))
		if !errors.Is(err, ErrRefused) {
			t.Errorf("POST %s: %v; want refused", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the loopback listener got %d requests", hits.Load())
	}
	// Allowed by the operator, the same listener is reached.
	if err := Post(context.Background(), Policy{Allow: loopback}.Client(), "http://localhost:"+port+"/x", []byte(`{}`)); err != nil {
		t.Fatalf("POST with loopback allowed: %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("the allowed listener got %d requests, want 1", hits.Load())
	}
}

// A redirect is not followed, even to an allowed address: the notice and
// its body stay with the webhook's own address.
func TestClientFollowsNoRedirect(t *testing.T) {
	second, hits := listener(t, func(w http.ResponseWriter, r *http.Request) {})
	first, _ := listener(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, second.URL+"/stolen", http.StatusTemporaryRedirect)
	})
	err := Post(context.Background(), Policy{Allow: loopback}.Client(), first.URL, []byte(`{"budget":"b"}`))
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("POST to a redirect: %v; want an error naming the 307", err)
	}
	if hits.Load() != 0 {
		t.Errorf("the redirect's target got %d requests", hits.Load())
	}
}

// A webhook that never answers is given up at the policy's timeout.
func TestClientTimesOut(t *testing.T) {
	release := make(chan struct{})
	ts, _ := listener(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	err := Post(context.Background(), Policy{Allow: loopback, Timeout: 100 * time.Millisecond}.Client(), ts.URL, []byte(`{}`))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("POST to a silent webhook: %v; want a timeout", err)
	}
}
