// Package client is a small Go client of Cumulus's ARM-compatible API. The
// CLI (and the web UI's tests) talk to the server only through it.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/endpoints"
	"github.com/cumulus-ml/cumulus/internal/lazyjson"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
)

// APIVersion is the version Cumulus implements.
const APIVersion = "2024-04-01"

// Client calls one control plane (one or several replicas of it) as one
// principal in one workspace.
type Client struct {
	// BaseURL is the first server URL; Server says which one answers now.
	BaseURL  string
	Servers  *endpoints.List // every replica; requests fail over among them
	Token    string
	HTTP     *http.Client
	Scope    api.Scope
	Location string
	// PollEvery is the polling interval of long-running operations when
	// the server sends no Retry-After.
	PollEvery time.Duration
}

// New builds a client from the CLI configuration. cfg.Server is one URL
// or a comma-separated list of the control plane's replicas.
func New(cfg config.CLI) (*Client, error) {
	if strings.TrimSpace(cfg.Server) == "" {
		return nil, errors.New("no server configured: run 'cumulus serve' once (it writes ~/.cumulus/config.yaml) or pass --server")
	}
	servers, err := endpoints.New(cfg.Server)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pool, err := tlsutil.Pool(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Client{
		BaseURL:   servers.URLs()[0],
		Servers:   servers,
		Token:     cfg.Token,
		HTTP:      &http.Client{Transport: tr, Timeout: 5 * time.Minute},
		Scope:     api.Scope{Subscription: cfg.Subscription, ResourceGroup: cfg.ResourceGroup, Workspace: cfg.Workspace},
		Location:  cfg.Location,
		PollEvery: time.Second,
	}, nil
}

// servers is c.Servers, or a list of BaseURL alone for a Client built
// without New.
func (c *Client) servers() (*endpoints.List, error) {
	if c.Servers != nil {
		return c.Servers, nil
	}
	return endpoints.New(c.BaseURL)
}

// Server is the server URL that answered last (the first one before any
// call): the one to show a person or hand to a browser.
func (c *Client) Server() string {
	if c.Servers != nil {
		return c.Servers.Current()
	}
	return strings.TrimSuffix(c.BaseURL, "/")
}

// send sends a request to path (relative to the server, or an absolute
// URL) through the server list, failing over between replicas as
// endpoints.List.Do does; body, when not nil, gives each attempt its body.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, body func() io.Reader) (*http.Response, error) {
	servers, err := c.servers()
	if err != nil {
		return nil, err
	}
	build := func(base string) (*http.Request, error) {
		var rd io.Reader
		if body != nil {
			rd = body()
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return nil, fmt.Errorf("build request: %w", err)
		}
		if header != nil {
			req.Header = header.Clone()
		}
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		return req, nil
	}
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		rest, ok := servers.Trim(path)
		if !ok { // a link to elsewhere: one attempt, no failover
			req, err := build("")
			if err != nil {
				return nil, err
			}
			resp, err := c.HTTP.Do(req)
			if err != nil {
				return nil, fmt.Errorf("cannot reach %s: %w", path, err)
			}
			return resp, nil
		}
		path = rest
	}
	resp, err := servers.Do(c.HTTP, build)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Cumulus server at %s (is 'cumulus serve' running?): %w", servers, err)
	}
	return resp, nil
}

// Response is a finished call: status and headers, body already decoded.
type Response struct {
	Status int
	Header http.Header
}

// Do calls path (relative to the server, or absolute) with an optional JSON
// body, decodes a 2xx JSON answer into out, and turns any other status into
// an *api.Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (*Response, error) {
	return c.DoWithHeaders(ctx, method, path, nil, body, out)
}

// DoWithHeaders is Do with extra request headers (If-Match, …).
func (c *Client) DoWithHeaders(ctx context.Context, method, path string, headers map[string]string, body, out any) (*Response, error) {
	u := path
	if !strings.Contains(u, "api-version=") {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "api-version=" + apiVersionOf(u)
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = lazyjson.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	}
	h := http.Header{}
	h.Set("Accept", "application/json")
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		h.Set(k, v)
	}
	var rd func() io.Reader
	if body != nil {
		rd = func() io.Reader { return bytes.NewReader(b) }
	}
	resp, err := c.send(ctx, method, u, h, rd)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode >= 300 {
		return r, decodeError(resp.StatusCode, data)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := lazyjson.Unmarshal(data, out); err != nil {
			return r, fmt.Errorf("decode response of %s %s: %w", method, path, err)
		}
	}
	return r, nil
}

// apiVersionOf is the api-version a path is sent with: its provider's.
func apiVersionOf(path string) string {
	if strings.Contains(strings.ToLower(path), "/providers/"+strings.ToLower(api.ManagedIdentityProvider)+"/") {
		return api.ManagedIdentityAPIVersion
	}
	return APIVersion
}

// Wait polls a long-running operation started by a response until it
// ends. progress, if set, is called with each status seen.
func (c *Client) Wait(ctx context.Context, r *Response, progress func(status string)) error {
	link := r.Header.Get("Azure-AsyncOperation")
	if link == "" {
		return nil
	}
	for {
		var st api.OperationStatus
		resp, err := c.Do(ctx, http.MethodGet, link, nil, &st)
		if err != nil {
			return err
		}
		if progress != nil {
			progress(st.Status)
		}
		switch st.Status {
		case api.OpSucceeded:
			return nil
		case api.OpFailed, api.OpCanceled:
			if st.Error != nil {
				return st.Error
			}
			return fmt.Errorf("operation %s", strings.ToLower(st.Status))
		}
		wait := c.PollEvery
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if d, err := time.ParseDuration(ra + "s"); err == nil && d < wait {
				wait = d
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// ListAll follows nextLink until the last page, collecting items.
func ListAll[T any](ctx context.Context, c *Client, method, path string) ([]T, error) {
	var all []T
	for path != "" {
		var page api.Page[T]
		if _, err := c.Do(ctx, method, path, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Value...)
		path, method = page.NextLink, http.MethodGet
	}
	return all, nil
}

// decodeError turns an error response into an *api.Error.
func decodeError(status int, data []byte) error {
	var er api.ErrorResponse
	if json.Unmarshal(data, &er) == nil && er.Error != nil && er.Error.Code != "" {
		er.Error.Status = status
		return er.Error
	}
	return &api.Error{Status: status, Code: http.StatusText(status), Message: strings.TrimSpace(string(data))}
}
