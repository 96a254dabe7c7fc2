package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/endpoints"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
)

// HTTPError is a non-2xx answer from the control plane.
type HTTPError struct {
	Method, Path string
	Status       int
	Body         string // first bytes of the answer, for the log
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// finalError marks an error that retrying cannot fix.
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

// final marks err as not worth retrying.
func final(err error) error { return finalError{err} }

// permanent reports whether retrying err cannot help: an error marked
// final, or a 4xx answer other than 408 (timeout) and 429 (slow down).
func permanent(err error) bool {
	if errors.As(err, new(finalError)) {
		return true
	}
	var he *HTTPError
	if !errors.As(err, &he) {
		return false
	}
	return he.Status >= 400 && he.Status < 500 && he.Status != http.StatusRequestTimeout && he.Status != http.StatusTooManyRequests
}

func isStatus(err error, status int) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == status
}

// client talks to the control plane with a bearer token, failing over
// between its replicas when one cannot be reached.
type client struct {
	servers *endpoints.List
	hc      *http.Client

	mu    sync.RWMutex
	token string
}

// newClient builds a client of serverURL, one URL or a comma-separated
// list of the control plane's replicas.
func newClient(serverURL, caFile, serverName string, hc *http.Client) (*client, error) {
	servers, err := endpoints.New(serverURL)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if caFile != "" || serverName != "" {
			tr.TLSClientConfig = &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
		}
		if caFile != "" {
			pool, err := tlsutil.Pool(caFile)
			if err != nil {
				return nil, err
			}
			tr.TLSClientConfig.RootCAs = pool
		}
		hc = &http.Client{Transport: tr}
	}
	return &client{servers: servers, hc: hc}, nil
}

func (c *client) setToken(t string) {
	c.mu.Lock()
	c.token = t
	c.mu.Unlock()
}

func (c *client) bearer() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.token
}

// request is one call; body is re-created for every attempt.
type request struct {
	method, path string
	query        url.Values
	token        string // overrides the node token (register uses the join token)
	json         any    // sent as JSON when set
	body         func() (io.ReadCloser, int64, error)
	contentType  string
}

// do sends req and decodes a JSON answer into out (when not nil).
func (c *client) do(ctx context.Context, req request, out any) error {
	resp, err := c.send(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", req.method, req.path, err)
	}
	return nil
}

// send sends req and returns a 2xx response for the caller to read and
// close; other statuses become *HTTPError. A replica that cannot be
// reached is skipped as endpoints.List.Do decides; the callers' own
// retries with backoff come on top.
func (c *client) send(ctx context.Context, req request) (*http.Response, error) {
	path := req.path
	if len(req.query) > 0 {
		path += "?" + req.query.Encode()
	}
	var js []byte
	ctype := req.contentType
	if req.json != nil {
		b, err := json.Marshal(req.json)
		if err != nil {
			return nil, err
		}
		js, ctype = b, "application/json"
	}
	tok := req.token
	if tok == "" {
		tok = c.bearer()
	}
	build := func(base string) (*http.Request, error) {
		var body io.Reader
		var size int64 = -1
		if js != nil {
			body, size = bytes.NewReader(js), int64(len(js))
		} else if req.body != nil {
			rc, n, err := req.body()
			if err != nil {
				return nil, err
			}
			body, size = rc, n
		}
		hr, err := http.NewRequestWithContext(ctx, req.method, base+path, body)
		if err != nil {
			if rc, ok := body.(io.Closer); ok {
				rc.Close()
			}
			return nil, err
		}
		if size >= 0 {
			hr.ContentLength = size
		}
		if ctype != "" {
			hr.Header.Set("Content-Type", ctype)
		}
		if tok != "" {
			hr.Header.Set("Authorization", "Bearer "+tok)
		}
		return hr, nil
	}
	resp, err := c.servers.Do(c.hc, build)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &HTTPError{Method: req.method, Path: req.path, Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}
