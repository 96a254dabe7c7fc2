package server

import (
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A request's path is made canonical once, before it is routed, and every
// check after that (the route, the role check, the lock check, the audit
// entry, the handler) reads the same r.URL.Path: empty and "." segments
// are dropped (//, /./, a trailing /), %2F is a slash like any other (the
// path is read decoded), ".." is refused, and once a route matched, its
// literal segments take the route's spelling (ARM matches them ignoring
// case; names keep the caller's, and every comparison of ids ignores case).
// A check that reads the path its own way cannot be led past by a spelling
// the router accepts.

// canonicalPath is p with empty and "." segments dropped; ok is false when
// p has a ".." segment.
func canonicalPath(p string) (string, bool) {
	segs := strings.Split(p, "/")
	out := segs[:0]
	for _, s := range segs {
		switch s {
		case "", ".":
			continue
		case "..":
			return "", false
		}
		out = append(out, s)
	}
	return "/" + strings.Join(out, "/"), true
}

// canonicalize makes r's path canonical (see above), or says why it cannot.
func canonicalize(r *http.Request) error {
	p, ok := canonicalPath(r.URL.Path)
	if !ok {
		return api.BadRequest(api.CodeBadRequest, "the path %q has a '..' segment; name the resource by its id", r.URL.Path)
	}
	if p != r.URL.Path || r.URL.RawPath != "" {
		r.URL.Path, r.URL.RawPath = p, ""
	}
	return nil
}

// spellAsRoute rewrites r's path, which matched pattern, with the route's
// literal segments and the captured names: the resource id every check
// reads.
func spellAsRoute(r *http.Request, pattern string) {
	pat := strings.Split(strings.Trim(pattern, "/"), "/")
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(pat) != len(segs) {
		return
	}
	for i, s := range pat {
		if !strings.HasPrefix(s, "{") {
			segs[i] = s
		}
	}
	r.URL.Path = "/" + strings.Join(segs, "/")
}
