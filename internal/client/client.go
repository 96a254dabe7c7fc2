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
	"net/url"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
)

// APIVersion is the version Cumulus implements.
const APIVersion = "2024-04-01"

// Client calls one server as one principal in one workspace.
type Client struct {
	BaseURL  string
	Token    string
	HTTP     *http.Client
	Scope    api.Scope
	Location string
	// PollEvery is the polling interval of long-running operations when
	// the server sends no Retry-After.
	PollEvery time.Duration
}

// New builds a client from the CLI configuration.
func New(cfg config.CLI) (*Client, error) {
	if cfg.Server == "" {
		return nil, errors.New("no server configured: run 'cumulus serve' once (it writes ~/.cumulus/config.yaml) or pass --server")
	}
	u, err := url.Parse(cfg.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http(s) URL", cfg.Server)
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
		BaseURL:   strings.TrimSuffix(cfg.Server, "/"),
		Token:     cfg.Token,
		HTTP:      &http.Client{Transport: tr, Timeout: 5 * time.Minute},
		Scope:     api.Scope{Subscription: cfg.Subscription, ResourceGroup: cfg.ResourceGroup, Workspace: cfg.Workspace},
		Location:  cfg.Location,
		PollEvery: time.Second,
	}, nil
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
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		u = c.BaseURL + path
	}
	if !strings.Contains(u, "api-version=") {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "api-version=" + APIVersion
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Cumulus server at %s (is 'cumulus serve' running?): %w", c.BaseURL, err)
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
		if err := json.Unmarshal(data, out); err != nil {
			return r, fmt.Errorf("decode response of %s %s: %w", method, path, err)
		}
	}
	return r, nil
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
