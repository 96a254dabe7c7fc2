// Package server is Cumulus's HTTP API: ARM-compatible paths, long-running
// operations, paging, ARM error shapes and bearer-token authentication.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/identity"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/webhook"
)

// Defaults are the names a local install starts with.
type Defaults struct {
	Subscription  string
	ResourceGroup string
	Location      string
	Workspace     string
}

// Quotas are the default core limits per location.
type Quotas struct {
	FamilyCores      int64
	TotalCores       int64
	LowPriorityCores int64
}

// Config is what the server needs besides its store.
type Config struct {
	Defaults Defaults
	Quotas   Quotas
	// PublicURL, when set, is the base of absolute URLs the server hands
	// out (Azure-AsyncOperation, nextLink); otherwise the request's host.
	PublicURL string
	PageSize  int
	// DataDir holds blobs, logs and outputs beside the store.
	DataDir string
	// Locations are the locations this server serves (computes,
	// workspaces, quotas and usages name one of them); empty: only
	// Defaults.Location.
	Locations []string
	// MaxBlobSize bounds one uploaded blob (0: DefaultMaxBlobSize).
	MaxBlobSize int64
	// BlobGrace is how long an uploaded blob that no job references is
	// kept (0: DefaultBlobGrace).
	BlobGrace time.Duration
	// PollTimeout is how long an agent's poll is held; HeartbeatInterval
	// is how often an agent must poll at least.
	PollTimeout       time.Duration
	HeartbeatInterval time.Duration
	// MaxAttempts bounds restarts of a job whose node failed.
	MaxAttempts int
	// MaxPreemptions bounds restarts of a job whose node was preempted.
	MaxPreemptions int
	// BodyTimeout bounds how long a request may take to send its body
	// (an upload: how long it may send nothing); UploadTimeout bounds an
	// upload (blob, job output, log chunk) in all. Zero: the defaults.
	BodyTimeout   time.Duration
	UploadTimeout time.Duration
	// Prices are what a node-hour costs, per VM size and tier, for cost
	// reports (zero: the catalogue's prices in USD).
	Prices cost.Prices
	// Network says which isolation settings the provider enforces; the
	// others are refused at create.
	Network NetworkEnforcement
	// CheckCompute, when set, refuses a compute whose nodes the provider
	// could never make (no machine of its Slurm partition is that large),
	// with the provider's words; it is asked when a compute is created and
	// when its placement changes. Its errors are ARM errors.
	CheckCompute func(ctx context.Context, c api.Compute) error
	// UsageInterval is how often agents sample utilization (0:
	// dispatch.DefaultUsageInterval); see usage.go.
	UsageInterval time.Duration
	// GPUs are the devices of the one machine the provider's nodes share
	// (local, docker): a size needing more a node is refused at create
	// and update, and listNodes shows which node holds which. nil: the
	// nodes have machines of their own.
	GPUs *gpu.Machine
	// Limits bound what a workspace and a job keep (zero fields: the
	// defaults).
	Limits Limits
	// Webhooks is where a budget's webhook may point (checked at PUT; the
	// controller checks each address it dials).
	Webhooks webhook.Policy
}

// Notifier is told when something changed that a controller acts on.
type Notifier interface{ Notify() }

// PendingNotifier is a Notifier that can be told of a change only work
// already in progress waits on (NotifyIfPending), which it may ignore
// when it has none.
type PendingNotifier interface {
	Notifier
	NotifyIfPending()
}

// NotifyIfPending tells n (nil: no one) of a change only work already in
// progress waits on: by NotifyIfPending when n is a PendingNotifier, else
// by Notify.
func NotifyIfPending(n Notifier) {
	if p, ok := n.(PendingNotifier); ok {
		p.NotifyIfPending()
	} else if n != nil {
		n.Notify()
	}
}

// Server serves the API.
type Server struct {
	cfg      Config
	db       *store.DB
	box      *secret.Box
	clock    clock.Clock
	log      *slog.Logger
	ops      Notifier
	clusters Notifier
	hub      *hub.Hub
	blobs    files.Blobs
	blobMu   sync.RWMutex // uploads (read) against the collector's file removal (write)
	logs     *files.Logs
	outputs  files.Outputs
	router   router
	agents   router
	history  router // Run History (history.go)
	ui       http.Handler
	sessions SessionAuth
	identity *identity.Issuer
	dispatch *dispatch.Service // the agent protocol
	metrics  *metrics.Metrics  // nil: no /metrics, nothing recorded
	usage    *dispatch.UsageRecorder
	jobPages *store.JobCache // decoded jobs of the job list's pages
	accounts sync.Map        // blob store account name → workspace id (workspaceByAccount)
	filing   [64]sync.Mutex  // one output of one job is filed at a time (fileOutput), by outputStripe
	blobTLS  BlobTLS         // certificates for <account>.blob.core.windows.net (blobproxy.go); nil: none
}

// Deps are the server's collaborators.
type Deps struct {
	DB       *store.DB
	Box      *secret.Box
	Clock    clock.Clock
	Log      *slog.Logger
	Ops      Notifier // woken when a long-running operation is queued
	Clusters Notifier // woken when jobs or nodes change
	Hub      *hub.Hub
	// Identity signs the tokens of managed identities (nil: none issued).
	Identity *identity.Issuer
	// UI, when set, serves the web studio at "/" and "/ui/…"; Sessions,
	// when set, lets API requests sign in with the studio's session cookie.
	UI       http.Handler
	Sessions SessionAuth
	// Metrics, when set, is served at GET /metrics to any signed-in
	// principal whose roles read, and records each request's duration.
	Metrics *metrics.Metrics
	// BlobTLS, when set, issues the certificates of the blob endpoints
	// the server answers as an HTTPS proxy (blobproxy.go).
	BlobTLS BlobTLS
}

// SessionAuth authenticates a browser's API request by its session cookie.
type SessionAuth interface {
	// Session returns the principal of the request's session; ok is false
	// when the request carries no session cookie. err is an ARM error: an
	// ended session, or a state-changing request without the CSRF header.
	Session(r *http.Request) (principal string, ok bool, err error)
}

// New builds a server.
func New(cfg Config, d Deps) *Server {
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.Prices.Currency == "" {
		cfg.Prices = cost.Catalog()
	}
	if len(cfg.Locations) == 0 && cfg.Defaults.Location != "" {
		cfg.Locations = []string{cfg.Defaults.Location}
	}
	if cfg.MaxBlobSize <= 0 {
		cfg.MaxBlobSize = DefaultMaxBlobSize
	}
	if cfg.BlobGrace <= 0 {
		cfg.BlobGrace = DefaultBlobGrace
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = dispatch.DefaultPollTimeout
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = dispatch.DefaultHeartbeatInterval
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = lifecycle.DefaultMaxAttempts
	}
	if cfg.MaxPreemptions <= 0 {
		cfg.MaxPreemptions = lifecycle.DefaultMaxPreemptions
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = DefaultUploadTimeout
	}
	if d.Hub == nil {
		d.Hub = hub.New()
	}
	s := &Server{cfg: cfg, db: d.DB, box: d.Box, clock: d.Clock, log: d.Log.With("component", "api"), ops: d.Ops, clusters: d.Clusters, hub: d.Hub,
		ui: d.UI, sessions: d.Sessions, identity: d.Identity, metrics: d.Metrics, jobPages: store.NewJobCache(), blobTLS: d.BlobTLS,
		blobs:   files.Blobs{Dir: filepath.Join(cfg.DataDir, "blobs")},
		logs:    &files.Logs{Dir: filepath.Join(cfg.DataDir, "logs"), Limit: cfg.Limits.JobLog},
		outputs: files.Outputs{Dir: filepath.Join(cfg.DataDir, "outputs")},
	}
	s.dispatch = &dispatch.Service{DB: d.DB, Clock: d.Clock, Hub: d.Hub, PollTimeout: cfg.PollTimeout,
		Retries: dispatch.Retries{MaxAttempts: cfg.MaxAttempts, MaxPreemptions: cfg.MaxPreemptions},
		Outputs: s.outputs, Changed: s.jobsChanged, RowsExited: s.parallelPartExited, Prices: &s.cfg.Prices}
	s.usage = newUsageRecorder(cfg, d)
	if d.Identity != nil {
		s.dispatch.ClientID = defaultClientID
	}
	if d.Box != nil {
		s.dispatch.LaunchToken = func(uid string, attempt int) string {
			return d.Box.Tag("mpi-launch/" + uid + "/" + strconv.Itoa(attempt))
		}
		s.dispatch.TrackingToken = s.trackingToken
	}
	s.routes()
	s.agentRoutes()
	return s
}

const (
	ws  = "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/{ws}"
	loc = "/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/locations/{loc}"
)

func (s *Server) routes() {
	r := &s.router
	r.handle("GET", "/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/workspaces", s.listWorkspacesInSubscription)
	r.handle("GET", "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces", s.listWorkspaces)
	r.handle("PUT", ws, s.putWorkspace)
	r.handle("GET", ws, s.getWorkspace)
	r.handle("PATCH", ws, s.patchWorkspace)
	r.handle("DELETE", ws, s.deleteWorkspace)

	r.handle("GET", ws+"/computes", s.listComputes)
	r.handle("PUT", ws+"/computes/{name}", s.putCompute)
	r.handle("GET", ws+"/computes/{name}", s.getCompute)
	r.handle("PATCH", ws+"/computes/{name}", s.patchCompute)
	r.handle("DELETE", ws+"/computes/{name}", s.deleteCompute)
	r.handle("POST", ws+"/computes/{name}/listNodes", s.listNodes)
	r.handle("GET", ws+"/computes/{name}/listNodes", s.listNodes) // nextLink pages are fetched with GET
	r.handle("POST", ws+"/computes/{name}/listKeys", s.listKeys)
	r.handle("POST", ws+"/computes/{name}/joinToken", s.joinToken)
	r.handle("POST", ws+"/computes/{name}/start", s.unsupportedComputeAction("Start"))
	r.handle("POST", ws+"/computes/{name}/stop", s.unsupportedComputeAction("Stop"))
	r.handle("POST", ws+"/computes/{name}/restart", s.unsupportedComputeAction("Restart"))
	r.handle("POST", ws+"/computes/{name}/nodes/{node}/simulateEviction", s.simulateEviction)
	r.handle("GET", ws+"/computes/{name}/queue", s.getQueue)

	r.handle("GET", loc+"/vmSizes", s.listVMSizes)
	r.handle("GET", loc+"/usages", s.listUsages)
	r.handle("GET", loc+"/quotas", s.listQuotas)
	r.handle("POST", loc+"/updateQuotas", s.updateQuotas)
	r.handle("GET", loc+"/operationStatuses/{id}", s.getOperation)
	r.handle("GET", loc+"/operationResults/{id}", s.getOperationResult)
	s.jobRoutes()
	s.environmentRoutes()
	s.componentRoutes()
	s.eventRoutes()
	s.costRoutes()
	s.usageRoutes()
	s.lockRoutes()
	s.budgetRoutes()
	s.datastoreRoutes()
	s.assetRoutes()
	s.historyRoutes()
}

// ServeHTTP authenticates, checks api-version and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	if err := canonicalize(r); err != nil {
		if _, blobHost := blobHostAccount(r); blobHost || strings.HasPrefix(r.URL.Path, api.BlobPathPrefix) {
			// The storage clients read Azure Storage's errors.
			s.writeBlobError(&blobRequest{w: rec, r: r}, blobErr(http.StatusBadRequest, "InvalidResourceName", "The specifed resource name contains invalid characters."))
			return
		}
		writeError(rec, r, s.log, err)
		return
	}
	s.boundBody(w, r)
	// route labels the request's duration: the matched pattern, never the
	// path (a series per resource would grow without bound).
	route := ""
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", p)
			writeError(rec, r, s.log, api.AsError(nil))
		}
		d := time.Since(start)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "api_version", r.URL.Query().Get("api-version"), "status", rec.status, "ms", d.Milliseconds())
		s.metrics.Request(routeMethod(r.Method, route), routeLabel(route), rec.status, d)
	}()
	withAudit(r)
	if r.Method == http.MethodConnect {
		route = "CONNECT"
		s.serveConnect(rec, r)
		return
	}
	if account, ok := blobHostAccount(r); ok {
		route = "/blob"
		s.serveBlobHost(rec, r, account)
		return
	}
	if strings.HasPrefix(r.URL.Path, api.BlobPathPrefix) {
		route = api.BlobPathPrefix
		s.serveBlobPath(rec, r)
		return
	}
	if isDataplane(r.URL.Path) {
		s.serveHistory(rec, r, &route)
		return
	}
	if strings.HasPrefix(r.URL.Path, mlflowPrefix) {
		route = mlflowPrefix
		s.serveMLflow(rec, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/cumulus/") || strings.HasPrefix(r.URL.Path, "/.well-known/") {
		s.serveCumulus(rec, r, &route)
		return
	}
	if s.ui != nil && (r.URL.Path == "/" || r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")) {
		route = "/ui"
		s.ui.ServeHTTP(rec, r)
		return
	}
	if r.URL.Path == metricsPath && s.metrics != nil {
		route = metricsPath
		s.serveMetrics(rec, r)
		return
	}
	h, p, pathOK, pattern := s.router.matchRoute(r.Method, r.URL.Path)
	route = pattern
	if h != nil {
		spellAsRoute(r, pattern)
	}
	if err := s.authenticateRequest(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cumulus"`)
		writeError(rec, r, s.log, err)
		return
	}
	if h == nil {
		if pathOK {
			writeError(rec, r, s.log, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeMethodNotAllowed,
				Message: "method " + r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		writeError(rec, r, s.log, &api.Error{Status: http.StatusNotFound, Code: "NoRegisteredProviderFound",
			Message: "no API matches the path " + r.URL.Path})
		return
	}
	if err := s.checkRouteAPIVersion(pattern, r.URL.Query().Get("api-version"), p); err != nil {
		writeError(rec, r, s.log, err)
		return
	}
	if err := checkScope(p); err != nil {
		writeError(rec, r, s.log, err)
		return
	}
	defer func() { s.audit(r, rec.status) }()
	if err := s.authorize(r); err != nil {
		writeError(rec, r, s.log, err)
		return
	}
	if err := s.checkLocks(r.Context(), s.db.Q(), r); err != nil {
		writeError(rec, r, s.log, err)
		return
	}
	if err := h(rec, r, p); err != nil {
		writeError(rec, r, s.log, err)
	}
}

// metricsPath serves the Prometheus exposition on the API listener.
const metricsPath = "/metrics"

// serveMetrics serves the exposition to a signed-in principal with a role
// that reads (rbac.Metrics, at any scope). Scrapes are reads: they are not
// audited. The exposition names every workspace's computes.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if err := s.authenticateRequest(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cumulus"`)
		writeError(w, r, s.log, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, r, s.log, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeMethodNotAllowed,
			Message: "method " + r.Method + " is not allowed on " + metricsPath})
		return
	}
	who := principal(r)
	as, err := store.RoleAssignments(r.Context(), s.db.Q(), who)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	roles := make([]rbac.Assignment, 0, len(as))
	for _, a := range as {
		roles = append(roles, rbac.Assignment{Role: a.Role, Scope: a.Scope})
	}
	if !rbac.AllowedAnywhere(roles, rbac.Metrics) {
		writeError(w, r, s.log, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: "principal '" + who + "' may not read the metrics: it needs a role that reads (Reader, ComputeOperator, Contributor or Owner) at some scope; see 'cumulus auth role list'"})
		return
	}
	s.metrics.Handler().ServeHTTP(w, r)
}

// routeLabel is the route label of a request that matched pattern.
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	return pattern
}

// routeMethod is the method label: a request that matched no route may
// have sent any method, which must not become a series of its own.
func routeMethod(method, pattern string) string {
	if pattern != "" {
		return method
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// authenticateRequest accepts a bearer token or, from the web studio's
// browser, a session cookie (a request with both is judged by its token).
func (s *Server) authenticateRequest(r *http.Request) error {
	if s.sessions != nil && r.Header.Get("Authorization") == "" {
		name, ok, err := s.sessions.Session(r)
		if err != nil {
			return err
		}
		if ok {
			*r = *r.WithContext(context.WithValue(r.Context(), principalKey{}, name))
			return nil
		}
	}
	return s.authenticate(r)
}

// checkScope validates the captured path segments.
func checkScope(p params) error {
	var v api.Validation
	for _, k := range []string{"sub", "rg", "loc"} {
		if val, ok := p[k]; ok {
			if err := api.CheckSegment(map[string]string{"sub": "subscription", "rg": "resource group", "loc": "location"}[k], val); err != nil {
				v.Add(api.CodeValidationError, k, "%s", err)
			}
		}
	}
	if val, ok := p["ws"]; ok {
		if err := api.CheckWorkspaceName(val); err != nil {
			v.Add(api.CodeInvalidName, "workspaceName", "%s", err)
		}
	}
	return v.Err()
}

func scopeOf(p params) api.Scope {
	return api.Scope{Subscription: p["sub"], ResourceGroup: p["rg"], Workspace: p["ws"]}
}

// baseURL is the absolute URL prefix for links the server hands out.
func (s *Server) baseURL(r *http.Request) string { return api.BaseURL(s.cfg.PublicURL, r) }

// EnsureDefaults creates the default workspace on a fresh store.
func (s *Server) EnsureDefaults(ctx context.Context) error {
	d := s.cfg.Defaults
	sc := api.Scope{Subscription: d.Subscription, ResourceGroup: d.ResourceGroup, Workspace: d.Workspace}
	_, err := store.Get[api.Workspace](ctx, s.db.Q(), store.KindWorkspace, sc.GroupID(), d.Workspace)
	if err == nil {
		return nil
	}
	w := api.Workspace{Location: d.Location, Properties: api.WorkspaceProperties{FriendlyName: d.Workspace, Description: "default workspace"}}
	if err := api.PrepareWorkspace(&w, sc, d.Location); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	w.Properties.CreationTime = &now
	w.Properties.WorkspaceID = secret.NewID()
	w.SystemData = &api.SystemData{CreatedBy: "cumulus", CreatedByType: "Application", CreatedAt: &now, LastModifiedBy: "cumulus", LastModifiedByType: "Application", LastModifiedAt: &now}
	_, err = store.Put(ctx, s.db.W(), store.KindWorkspace, sc.GroupID(), d.Workspace, w, store.IfNoneMatch, now)
	if err != nil && !isExists(err) {
		return err
	}
	return nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
