package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// The node-local managed-identity endpoint, compatible with the one Azure
// ML compute gives jobs: a job gets MSI_ENDPOINT, MSI_SECRET and
// DEFAULT_IDENTITY_CLIENT_ID, and the Azure SDKs' ManagedIdentityCredential
// asks GET $MSI_ENDPOINT?resource=…&clientid=…&api-version=… with the
// header "secret: $MSI_SECRET". The secret is per job and valid only while
// the job's processes run; the agent asks the control plane for the token
// with its node token, so a job gets tokens only for its own cluster's
// identities. Tokens are never logged.

// msiStart starts the endpoint on a loopback port, once. It serves a
// parallel step's driver too (parallel.go), with the same per-job secret.
func (a *agent) msiStart() (string, error) {
	a.msiOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			a.msiErr = err
			return
		}
		a.msiURL = "http://" + ln.Addr().String() + "/msi/token"
		mux := http.NewServeMux()
		mux.HandleFunc("/msi/token", a.serveMSI)
		mux.HandleFunc(parallelPath, a.serveParallel) // a parallel step's driver (parallel.go)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		go func() {
			<-a.life.Done()
			_ = srv.Close()
		}()
	})
	return a.msiURL, a.msiErr
}

// msiGrant registers a job's secret and returns it.
func (a *agent) msiGrant(j *job) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	a.mu.Lock()
	if a.msiJobs == nil {
		a.msiJobs = map[string]*job{}
	}
	a.msiJobs[secret] = j
	a.mu.Unlock()
	return secret, nil
}

// msiRevoke forgets every secret of a job (its processes ended).
func (a *agent) msiRevoke(j *job) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for s, x := range a.msiJobs {
		if x == j {
			delete(a.msiJobs, s)
		}
	}
}

func msiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": msg})
}

func (a *agent) serveMSI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		msiError(w, http.StatusMethodNotAllowed, "invalid_request", "use GET")
		return
	}
	secret := r.Header.Get("secret")
	a.mu.Lock()
	j := a.msiJobs[secret]
	a.mu.Unlock()
	if secret == "" || j == nil {
		msiError(w, http.StatusUnauthorized, "invalid_request", "the secret header is missing or not the secret of a running job")
		return
	}
	q := r.URL.Query()
	req := agentapi.TokenRequest{Resource: q.Get("resource"), ClientID: q.Get("clientid")}
	if req.Resource == "" {
		msiError(w, http.StatusBadRequest, "invalid_request", "the resource query parameter is required")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var out agentapi.TokenResponse
	err := a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/token", json: req}, &out)
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		msiError(w, he.Status, "invalid_request", he.Error())
		return
	case err != nil:
		msiError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the control plane could not be reached: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
