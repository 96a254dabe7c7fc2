// Package endpoints holds the control-plane URLs a client may call (the
// replicas of 'cumulus serve', which all serve the whole API) and sends
// requests through them, failing over to the next URL when one replica
// cannot be reached. The CLI's client and the node agent share it, so a
// server list is parsed, and failover decided, in one place.
package endpoints

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// Parse reads a comma-separated list of http(s) base URLs, such as
// "https://a:8787,https://b:8787". Spaces around entries, trailing slashes
// and repeated URLs are dropped; an empty list or an entry that is not an
// http(s) URL with a host is an error.
func Parse(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimRight(strings.TrimSpace(f), "/")
		if f == "" {
			continue
		}
		u, err := url.Parse(f)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("server %q is not an http(s) URL", f)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no server URL in %q", s)
	}
	return out, nil
}

// Overlap reports whether two server lists (as Parse reads them) name at
// least one URL in common: the same control plane, with replicas added,
// removed or reordered.
func Overlap(a, b string) bool {
	la, err := Parse(a)
	if err != nil {
		return false
	}
	lb, err := Parse(b)
	if err != nil {
		return false
	}
	for _, x := range la {
		for _, y := range lb {
			if x == y {
				return true
			}
		}
	}
	return false
}

// List is a set of server URLs with a sticky current one: the URL that
// last answered is tried first. It is safe for concurrent use.
type List struct {
	list atomic.Pointer[[]string] // replaced whole (Replace), never changed in place
	cur  atomic.Uint32            // index into the URLs of the one to try first
}

// New parses s (see Parse) into a List.
func New(s string) (*List, error) {
	urls, err := Parse(s)
	if err != nil {
		return nil, err
	}
	l := &List{}
	l.list.Store(&urls)
	return l, nil
}

func (l *List) urls() []string { return *l.list.Load() }

// URLs returns the list's URLs in the order given.
func (l *List) URLs() []string { return append([]string(nil), l.urls()...) }

// Current is the URL tried first now: the one that last answered.
func (l *List) Current() string { u := l.urls(); return u[int(l.cur.Load())%len(u)] }

// String is the list as given, comma-separated.
func (l *List) String() string { return strings.Join(l.urls(), ",") }

// Replace puts to in old's place (an agent's server that moved from
// http:// to https:// at the same address); false when old is not in
// the list.
func (l *List) Replace(old, to string) bool {
	for {
		cur := l.list.Load()
		i := slices.Index(*cur, old)
		if i < 0 {
			return false
		}
		next := slices.Clone(*cur)
		next[i] = to
		if l.list.CompareAndSwap(cur, &next) {
			return true
		}
	}
}

// Trim returns the path of an absolute URL u that starts with one of the
// list's URLs (a nextLink or an operation link a replica handed out), so
// that it too can fail over; ok is false for other URLs.
func (l *List) Trim(u string) (path string, ok bool) {
	for _, base := range l.urls() {
		if rest, found := strings.CutPrefix(u, base); found && (rest == "" || rest[0] == '/' || rest[0] == '?') {
			return rest, true
		}
	}
	return "", false
}

// Do sends the request that build makes for a base URL through hc,
// starting at the current URL and going round the list at most once.
// build is called for every attempt, so each attempt gets a fresh body.
//
// It moves to the next URL when an attempt gets no HTTP answer (refused,
// reset, EOF, timeout, TLS failure) or a 502, 503 or 504 (a proxy in
// front of a dead replica), but only when repeating the request is safe:
// GET, HEAD, PUT, DELETE and OPTIONS always, any other method (POST) only
// when the connection was never made, so the server cannot have seen it.
// A URL that failed so is no longer tried first by later calls.
//
// It returns what the last attempt got: a response (any status, its body
// for the caller to close) or an error.
func (l *List) Do(hc *http.Client, build func(base string) (*http.Request, error)) (*http.Response, error) {
	urls := l.urls()
	n := len(urls)
	start := int(l.cur.Load()) % n
	for i := 0; ; i++ {
		idx := (start + i) % n
		req, err := build(urls[idx])
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if !down(resp, err) {
			l.cur.Store(uint32(idx))
			return resp, err
		}
		if req.Context().Err() != nil {
			return resp, err // the caller gave up, not the server
		}
		l.cur.CompareAndSwap(uint32(idx), uint32((idx+1)%n))
		if i == n-1 || !(idempotent(req.Method) || Unsent(err)) {
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
}

// down reports whether an attempt's outcome says its replica is not
// serving: no HTTP answer, or a gateway's 502/503/504.
func down(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Unsent reports whether err is a failure to connect (refused, no route,
// name not found, dial timeout): no byte of the request went out, so any
// request, a POST too, may be sent again elsewhere.
func Unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// idempotent reports whether sending method twice does what sending it
// once does (ARM's PUT and DELETE are).
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}
