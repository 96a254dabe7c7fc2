package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
func isExists(err error) bool   { return errors.Is(err, store.ErrExists) }

// preconditions reads If-Match / If-None-Match into Put's ifVersion:
// store.IfNoneMatch, store.IfExists (If-Match: *), the version for
// If-Match, 0 for neither.
func preconditions(r *http.Request) (int64, error) {
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm == "*" {
		return store.IfNoneMatch, nil
	}
	im := strings.TrimSpace(r.Header.Get("If-Match"))
	switch im {
	case "":
		return 0, nil
	case "*":
		return store.IfExists, nil
	}
	im = strings.TrimPrefix(im, "W/")
	v, err := strconv.ParseInt(strings.Trim(im, `"`), 10, 64)
	if err != nil || v <= 0 {
		// Not an etag this server ever issued: it cannot match.
		return 0, &api.Error{Status: http.StatusPreconditionFailed, Code: api.CodePreconditionFailed,
			Message: "If-Match " + im + " does not match the resource's current ETag"}
	}
	return v, nil
}

// listPage writes one page of resources with an absolute nextLink that
// carries the api-version and an opaque skip token.
func listPage[T any](s *Server, w http.ResponseWriter, r *http.Request, kind, parent string, exact bool, view func(T) any) error {
	after, err := decodeSkipToken(r.URL.Query().Get("$skipToken"))
	if err != nil {
		return err
	}
	size := s.pageSize(r)
	docs, err := store.List[T](r.Context(), s.db.Q(), kind, parent, exact, after, size+1)
	if err != nil {
		return err
	}
	page := api.Page[any]{Value: []any{}}
	for i, d := range docs {
		if i == size {
			break
		}
		page.Value = append(page.Value, view(d.Value))
	}
	if len(docs) > size {
		page.NextLink = s.nextLink(r, "$skipToken", encodeSkipToken(docs[size-1].Key))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// skipParam reads a page's $skip (0 when absent).
func skipParam(r *http.Request) (int, error) {
	t := r.URL.Query().Get("$skip")
	if t == "" {
		return 0, nil
	}
	skip, err := strconv.Atoi(t)
	if err != nil || skip < 0 {
		return 0, api.BadRequest(api.CodeBadRequest, "$skip must be a non-negative integer")
	}
	return skip, nil
}

func (s *Server) pageSize(r *http.Request) int {
	size := s.cfg.PageSize
	if t := r.URL.Query().Get("$top"); t != "" {
		if n, err := strconv.Atoi(t); err == nil && n > 0 && n < size {
			size = n
		}
	}
	return size
}

// nextLink is the request's own absolute URL with key set to value.
func (s *Server) nextLink(r *http.Request, key, value string) string {
	q := r.URL.Query()
	q.Set(key, value)
	return s.baseURL(r) + r.URL.Path + "?" + q.Encode()
}

func encodeSkipToken(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeSkipToken(t string) (string, error) {
	if t == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil {
		return "", api.BadRequest(api.CodeBadRequest, "$skipToken is not a token this server issued")
	}
	return string(b), nil
}

// missingWithPrecondition is the answer for a conditional request on a
// resource that does not exist: 412, as RFC 9110 requires.
func missingWithPrecondition(ifv int64) error {
	if ifv > 0 || ifv == store.IfExists {
		return store.ErrETagMismatch
	}
	return nil
}

// timeRange reads a query's since and until: RFC 3339 times, or durations
// before now, defSince when since is absent (until absent is zero: open).
// A bad value, or until before since, is an ARM 400 that names it.
func timeRange(q url.Values, now, defSince time.Time) (since, until time.Time, err error) {
	parse := func(name string, def time.Time) (time.Time, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return def, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, nil
		}
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return now.Add(-d), nil
		}
		return time.Time{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Target: name,
			Message: fmt.Sprintf("%s %q is neither an RFC 3339 time (2024-05-01T09:00:00Z) nor a duration before now (1h, 30m)", name, v)}
	}
	if since, err = parse("since", defSince); err != nil {
		return since, until, err
	}
	if until, err = parse("until", time.Time{}); err != nil {
		return since, until, err
	}
	if !until.IsZero() && until.Before(since) {
		return since, until, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Target: "until",
			Message: "until is before since"}
	}
	return since, until, nil
}
