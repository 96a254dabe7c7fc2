package kubernetes

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// The provider talks to the API server with its own small client: JSON
// over HTTP(S) for the few objects it uses, and a list-and-watch of its
// pods (podcache.go). Kubernetes' Go client would do the same, but it
// registers every API group's types when a program starts, and every
// start of the cumulus binary (each CLI command, each agent, each job's
// init) paid for that: several milliseconds of CPU and half the binary.

// StatusError is the API server's refusal (a metav1.Status).
type StatusError struct {
	Code    int    // HTTP status
	Reason  string // NotFound, AlreadyExists, Conflict, Forbidden, Gone, …
	Message string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the Kubernetes API server answered %d %s", e.Code, e.Reason)
}

func reasonOf(err error) (string, int) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Reason, se.Code
	}
	return "", 0
}

// isNotFound reports whether err says the object does not exist.
func isNotFound(err error) bool {
	r, code := reasonOf(err)
	return r == "NotFound" || (r == "" && code == http.StatusNotFound)
}

// isAlreadyExists reports whether err says a create found the object there.
func isAlreadyExists(err error) bool {
	r, _ := reasonOf(err)
	return r == "AlreadyExists"
}

// isGone reports whether err says a watch's resource version is too old.
func isGone(err error) bool {
	r, code := reasonOf(err)
	return r == "Expired" || r == "Gone" || code == http.StatusGone
}

// apiClient sends requests to one API server with one identity.
type apiClient struct {
	host string
	http *http.Client
	auth *authenticator
}

// newAPIClient makes a client for cfg.
func newAPIClient(cfg *Config) (*apiClient, error) {
	host := strings.TrimSuffix(cfg.Host, "/")
	u, err := url.Parse(host)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("API server address %q is not an http(s) URL", cfg.Host)
	}
	tc := &tls.Config{ServerName: cfg.TLSServerName, InsecureSkipVerify: cfg.Insecure, MinVersion: tls.VersionTLS12}
	if len(cfg.CAData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CAData) {
			return nil, errors.New("the API server's CA holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	a := &authenticator{cfg: cfg}
	if len(cfg.CertData) > 0 || cfg.Exec != nil {
		tc.GetClientCertificate = a.clientCertificate
		if len(cfg.CertData) > 0 {
			cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
			if err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			a.cert = &cert
		}
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &apiClient{host: host, http: &http.Client{Transport: tr}, auth: a}, nil
}

// do sends one request and decodes a success into out (when not nil).
func (c *apiClient) do(ctx context.Context, method, path, contentType string, body, out any) error {
	resp, err := c.send(ctx, method, path, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the API server's answer: %w", method, path, err)
	}
	return nil
}

// send sends one request and returns the response of a success (2xx),
// whose body the caller closes; any other answer is a *StatusError.
func (c *apiClient) send(ctx context.Context, method, path, contentType string, body any) (*http.Response, error) {
	var raw []byte
	if body != nil {
		var err error
		if b, ok := body.([]byte); ok {
			raw = b
		} else if raw, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		var r io.Reader
		if raw != nil {
			r = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.host+path, r)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "cumulus")
		if raw != nil {
			if contentType == "" {
				contentType = "application/json"
			}
			req.Header.Set("Content-Type", contentType)
		}
		if err := c.auth.authorize(ctx, req); err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		se := statusError(resp)
		resp.Body.Close()
		// Credentials from a plugin may have expired before their stated
		// time: get new ones once.
		if se.Code == http.StatusUnauthorized && attempt == 0 && c.auth.refresh() {
			continue
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, se)
	}
}

// statusError reads the API server's Status from a refusal.
func statusError(resp *http.Response) *StatusError {
	se := &StatusError{Code: resp.StatusCode}
	var st struct {
		Kind    string `json:"kind"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" {
		se.Reason, se.Message = st.Reason, st.Message
	} else if msg := strings.TrimSpace(string(raw)); msg != "" && len(msg) < 512 {
		se.Message = fmt.Sprintf("the Kubernetes API server answered %d: %s", resp.StatusCode, msg)
	}
	if se.Reason == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			se.Reason = "NotFound"
		case http.StatusConflict:
			se.Reason = "Conflict"
		case http.StatusGone:
			se.Reason = "Gone"
		case http.StatusUnauthorized:
			se.Reason = "Unauthorized"
		case http.StatusForbidden:
			se.Reason = "Forbidden"
		case http.StatusBadRequest:
			se.Reason = "BadRequest"
		case http.StatusUnprocessableEntity:
			se.Reason = "Invalid"
		}
	}
	return se
}

// authenticator adds the identity of a Config to requests: a bearer token
// (given, from a file that is read again as it rotates, or from an exec
// plugin), basic credentials, or a client certificate (given or from an
// exec plugin, presented in the TLS handshake).
type authenticator struct {
	cfg  *Config
	mu   sync.Mutex
	cert *tls.Certificate // given, or the plugin's

	fileToken string // BearerTokenFile's content and when it was read
	fileRead  time.Time

	plugin        *execCredential // the exec plugin's last answer
	pluginExpires time.Time
}

// tokenFileTTL is how long a token file is trusted before it is read
// again (a pod's service account token is rotated by the kubelet).
const tokenFileTTL = time.Minute

func (a *authenticator) authorize(ctx context.Context, req *http.Request) error {
	switch {
	case a.cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+a.cfg.BearerToken)
	case a.cfg.BearerTokenFile != "":
		tok, err := a.tokenFromFile()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case a.cfg.Exec != nil:
		cred, err := a.execCredential(ctx)
		if err != nil {
			return err
		}
		if cred.Token != "" {
			req.Header.Set("Authorization", "Bearer "+cred.Token)
		}
	case a.cfg.Username != "":
		req.SetBasicAuth(a.cfg.Username, a.cfg.Password)
	}
	return nil
}

func (a *authenticator) tokenFromFile() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fileToken != "" && time.Since(a.fileRead) < tokenFileTTL {
		return a.fileToken, nil
	}
	b, err := os.ReadFile(a.cfg.BearerTokenFile)
	if err != nil {
		if a.fileToken != "" {
			return a.fileToken, nil // keep the last one rather than fail every call
		}
		return "", fmt.Errorf("API server token: %w", err)
	}
	a.fileToken, a.fileRead = strings.TrimSpace(string(b)), time.Now()
	return a.fileToken, nil
}

// refresh forgets what may have expired (a plugin's credentials, a token
// file read before its rotation) and says whether there was anything to
// get again.
func (a *authenticator) refresh() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.cfg.Exec != nil:
		a.plugin = nil
		return true
	case a.cfg.BearerTokenFile != "":
		a.fileToken = ""
		return true
	}
	return false
}

// execCredential runs the exec plugin when it has no credentials that are
// still valid.
func (a *authenticator) execCredential(ctx context.Context) (*execCredential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.plugin != nil && (a.pluginExpires.IsZero() || time.Until(a.pluginExpires) > 10*time.Second) {
		return a.plugin, nil
	}
	cred, err := runExecPlugin(ctx, a.cfg.Exec, a.cfg.Host)
	if err != nil {
		return nil, err
	}
	if cred.ClientCertificateData != "" {
		cert, err := tls.X509KeyPair([]byte(cred.ClientCertificateData), []byte(cred.ClientKeyData))
		if err != nil {
			return nil, fmt.Errorf("the exec plugin's client certificate: %w", err)
		}
		a.cert = &cert
	}
	a.plugin, a.pluginExpires = cred, time.Time{}
	if cred.ExpirationTimestamp != nil {
		a.pluginExpires = *cred.ExpirationTimestamp
	}
	return cred, nil
}

// clientCertificate presents the given or the plugin's certificate.
func (a *authenticator) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if a.cfg.Exec != nil {
		if _, err := a.execCredential(context.Background()); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cert == nil {
		return &tls.Certificate{}, nil // none: the server decides
	}
	return a.cert, nil
}
