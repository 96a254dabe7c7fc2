package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
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
	hc      atomic.Pointer[http.Client] // replaced whole when a server moves to TLS

	// What a move to TLS builds on (see upgrade): the transport of the
	// client as made, the CA file given, the name certificates are
	// checked for, and the certificates servers gave so far.
	base       *http.Transport // nil when the caller gave a client whose transport is not one
	caFile     string
	serverName string
	tlsMu      sync.Mutex
	certs      []*x509.Certificate
	log        func() *slog.Logger // nil: discard

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
	c := &client{servers: servers, caFile: caFile, serverName: serverName}
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
	c.base, _ = hc.Transport.(*http.Transport)
	c.hc.Store(hc)
	return c, nil
}

// upgradeFrom follows a server to TLS: an answer that came over plain
// HTTP and carries the server's certificate (agentapi.HeaderServerCertificate:
// the server restarted with TLS and still answers this agent where it
// joined) moves the server's URL to https:// at the same address, with
// that certificate trusted, for the name the server gives, besides the
// roots trusted before. Only an answer over plain HTTP, from the address
// this agent already trusts, is heeded; a server on https:// never goes
// back to http://.
func (c *client) upgradeFrom(resp *http.Response) {
	der := resp.Header.Get(agentapi.HeaderServerCertificate)
	if der == "" || resp.Request == nil || resp.Request.URL.Scheme != "http" {
		return
	}
	at := "http://" + resp.Request.URL.Host
	from := ""
	for _, u := range c.servers.URLs() {
		if u == at || strings.HasPrefix(u, at+"/") {
			from = u
		}
	}
	if from == "" {
		return
	}
	to := "https://" + strings.TrimPrefix(from, "http://")
	err := c.upgrade(from, to, der, resp.Header.Get(agentapi.HeaderServerName))
	log := slog.New(slog.DiscardHandler)
	if c.log != nil {
		log = c.log()
	}
	if err != nil {
		log.Warn("the control plane serves HTTPS now but this agent cannot follow it; it carries on over plain HTTP", "server", from, "err", err)
		return
	}
	log.Info("the control plane serves HTTPS now: moved to it, trusting the certificate it gave where this agent joined", "from", from, "to", to)
}

// upgrade puts to in from's place, trusting the certificate der (base64
// DER) for name as well as what was trusted before.
func (c *client) upgrade(from, to, der, name string) error {
	b, err := base64.StdEncoding.DecodeString(der)
	if err != nil {
		return fmt.Errorf("the server's certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(b)
	if err != nil {
		return fmt.Errorf("the server's certificate: %w", err)
	}
	c.tlsMu.Lock()
	defer c.tlsMu.Unlock()
	if c.base == nil {
		return errors.New("the agent's HTTP client was given to it and cannot be changed")
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return fmt.Errorf("read the CA file: %w", err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	c.certs = append(c.certs, cert)
	for _, x := range c.certs {
		pool.AddCert(x)
	}
	if name == "" {
		name = c.serverName
	}
	tr := c.base.Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	c.hc.Store(&http.Client{Transport: tr})
	if !c.servers.Replace(from, to) {
		return fmt.Errorf("%s is not a server of this agent", from)
	}
	return nil
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
	resp, err := c.servers.Do(c.hc.Load(), build)
	if err != nil {
		return nil, err
	}
	c.upgradeFrom(resp)
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &HTTPError{Method: req.method, Path: req.path, Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}
