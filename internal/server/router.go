package server

import (
	"net/http"
	"strings"
)

// route is one method and ARM path pattern. Literal segments match ignoring
// case, as ARM's do; {name} segments capture.
type route struct {
	method  string
	pattern []string
	raw     string // the pattern as registered: the metrics' route label
	h       handler
}

// params are the captured path segments.
type params map[string]string

type handler func(w http.ResponseWriter, r *http.Request, p params) error

type router struct{ routes []route }

func (rt *router) handle(method, pattern string, h handler) {
	rt.routes = append(rt.routes, route{method, strings.Split(strings.Trim(pattern, "/"), "/"), pattern, h})
}

// match finds the handler for a request. When the path matches but the
// method does not, it reports that so the caller can answer 405.
func (rt *router) match(method, path string) (handler, params, bool) {
	h, p, ok, _ := rt.matchRoute(method, path)
	return h, p, ok
}

// matchRoute is match that also names the route's pattern ("" when none
// matched both path and method).
func (rt *router) matchRoute(method, path string) (handler, params, bool, string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	pathMatched := false
	for _, r := range rt.routes {
		p, ok := matchSegments(r.pattern, segs)
		if !ok {
			continue
		}
		pathMatched = true
		if r.method == method {
			return r.h, p, true, r.raw
		}
	}
	return nil, nil, pathMatched, ""
}

func matchSegments(pattern, segs []string) (params, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	var p params
	for i, pat := range pattern {
		if strings.HasPrefix(pat, "{") {
			if segs[i] == "" {
				return nil, false
			}
			if p == nil {
				p = params{}
			}
			p[pat[1:len(pat)-1]] = segs[i]
			continue
		}
		if !strings.EqualFold(pat, segs[i]) {
			return nil, false
		}
	}
	return p, true
}
