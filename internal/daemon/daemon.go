// Package daemon assembles the control plane: store, API server and
// controllers, listening on one address. `cumulus serve` runs it; tests
// start it in-process.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/endpoints"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/identity"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/docker"
	"github.com/cumulus-ml/cumulus/internal/provider/kubernetes"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
	"github.com/cumulus-ml/cumulus/internal/provider/sim"
	"github.com/cumulus-ml/cumulus/internal/provider/slurm"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/readmodel"
	"github.com/cumulus-ml/cumulus/internal/replica"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
	"github.com/cumulus-ml/cumulus/internal/ui"
	"github.com/cumulus-ml/cumulus/internal/webhook"
)

// Options configure the control plane. DefaultOptions gives a working
// local install.
type Options struct {
	Listen string
	// MetricsListen, when set, is a loopback address that serves the
	// Prometheus metrics at /metrics without authentication (the API
	// listener serves them to signed-in readers either way).
	MetricsListen string
	DataDir       string
	// Store is where the state lives: "" for the SQLite file cumulus.db in
	// DataDir, or a postgres:// URL of a database several replicas share
	// (each then runs the API; one, elected, runs the controllers).
	Store string
	// Replicas are the API URLs of every replica, handed to agents and
	// written to the CLI config so they fail over ("" = URL alone).
	Replicas []string
	// LeaderLease is how long the controllers' leader holds its lease
	// unrenewed (PostgreSQL store; 0 = replica.DefaultLease).
	LeaderLease   time.Duration
	ConfigPath    string // CLI config written on first start; "" = <DataDir>/config.yaml
	TLSCert       string
	TLSKey        string
	TLSSelfSigned bool
	PublicURL     string
	Defaults      server.Defaults
	Quotas        server.Quotas
	// Locations are the locations the server serves; empty: only
	// Defaults.Location, which must be one of them.
	Locations []string
	// MaxBlobSize bounds one uploaded blob (code snapshot, input folder);
	// BlobGrace is how long a blob no job references is kept.
	MaxBlobSize int64
	BlobGrace   time.Duration
	// EventRetention is how long compute and node events are kept
	// (0: controller.DefaultEventRetention).
	EventRetention time.Duration
	// PriceFile holds the hourly prices of VM sizes for cost reports
	// ("": the catalogue's, in USD); see cost.Load.
	PriceFile string
	// SizesFile adds sizes of one's own hardware to the catalogue (see
	// catalog.ParseSizes); GPUModelMatch is how a size's GPU model is
	// matched against the machine's devices: "count" (any device, the
	// default) or "strict" (only devices of that model).
	SizesFile     string
	GPUModelMatch string

	NewAdminToken bool // mint a fresh admin token and rewrite the CLI config
	Clock         clock.Clock
	Log           *slog.Logger

	// Provider names where nodes come from, for every cluster of this
	// server: "local" (agent processes on this machine) or "docker" (each
	// node a container of NodeImage on this machine's Docker engine).
	// AgentCommand overrides the local agent binary (tests).
	Provider         string
	AgentCommand     []string
	NodesDir         string        // local: node folders, outside DataDir ("" = config.NodesDir(DataDir))
	JobUsersDir      string        // local: the machine's claims of job users ("" = local.DefaultJobUsersDir)
	JobsAsServerUser bool          // local: jobs run as the server's user, not isolated (see local.Options)
	ProcessPerNode   bool          // local: an agent process per node, not one node host per compute (see local.Options)
	NodeImage        string        // docker: the node image; built from this binary at start if missing
	Kubeconfig       string        // kubernetes: kubeconfig ("" = in-cluster, $KUBECONFIG or ~/.kube/config)
	KubeNamespace    string        // kubernetes: namespace of node pods ("" = the kubeconfig's)
	Slurm            slurm.Options // slurm: where node jobs go and what they run (the daemon sets Owner, Clock, Log)
	SimJobDuration   time.Duration // sim: how long a simulated job runs (nodes are simulated agents)
	SimHTTP2         bool          // sim: the simulated agents share HTTP/2 connections (unencrypted on http://) instead of one HTTP/1.1 connection each
	SimHost          []string      // sim: a command that runs the simulated agents in a process of their own (sim.ServeHost); empty: in this process
	// NodeProvider, when set, is the provider, made by the caller, and
	// Provider names none: for tests (providertest.Fake), not a flag.
	NodeProvider     provider.Provider
	HeartbeatTimeout time.Duration
	ProvisionTimeout time.Duration
	PollTimeout      time.Duration
	MaxAttempts      int
	EvictionRate     float64 // random preemptions of low-priority nodes per node-hour (chaos testing)

	// BodyTimeout bounds how long a request may take to send its body (an
	// upload: how long it may send nothing); UploadTimeout bounds an upload
	// (blob, job output, log chunk) in all. See server.Config.
	BodyTimeout   time.Duration
	UploadTimeout time.Duration

	// UsageInterval is how often agents sample node and job utilization;
	// UsageRetention how long the samples are kept (see usage.go).
	UsageInterval  time.Duration
	UsageRetention time.Duration

	// Limits bound what a workspace and a job keep (see server.Limits).
	Limits server.Limits

	// WebhookAllow are the address ranges (CIDRs or addresses) budget
	// webhooks may reach besides the public internet (see package webhook).
	WebhookAllow []string
}

// HTTP connection limits of the control plane's listener.
const (
	// readHeaderTimeout bounds how long a client may take to send a
	// request's headers.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes a kept-alive connection that sends no request for
	// this long (agents poll at least every heartbeat interval).
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers (tokens, cookies).
	maxHeaderBytes = 64 << 10
)

// DefaultOptions are the defaults of `cumulus serve`.
func DefaultOptions() Options {
	return Options{
		Listen:           "127.0.0.1:8787",
		DataDir:          config.DataDir(),
		Defaults:         server.Defaults{Subscription: "local", ResourceGroup: "local", Location: "local", Workspace: "default"},
		Quotas:           server.Quotas{FamilyCores: 400, TotalCores: 1000, LowPriorityCores: 1000},
		MaxBlobSize:      server.DefaultMaxBlobSize,
		BlobGrace:        server.DefaultBlobGrace,
		Provider:         "local",
		NodeImage:        nodeimage.DefaultTag,
		HeartbeatTimeout: controller.DefaultHeartbeatTimeout,
		ProvisionTimeout: controller.DefaultProvisionTimeout,
		PollTimeout:      dispatch.DefaultPollTimeout,
		MaxAttempts:      lifecycle.DefaultMaxAttempts,
		BodyTimeout:      server.DefaultBodyTimeout,
		UploadTimeout:    server.DefaultUploadTimeout,
		UsageInterval:    dispatch.DefaultUsageInterval,
		UsageRetention:   DefaultUsageRetention,
		Limits: server.Limits{WorkspaceRunData: server.DefaultWorkspaceRunData, WorkspaceBlobs: server.DefaultWorkspaceBlobs,
			JobLog: server.DefaultJobLog},
	}
}

// Validate checks options before anything starts; it changes nothing.
func (o Options) Validate() error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if o.TLSCert != "" && o.TLSSelfSigned {
		return errors.New("use either --tls-cert/--tls-key or --tls-self-signed, not both")
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	if !o.tls() && !isLoopback(host) {
		return fmt.Errorf("refusing to serve plain HTTP on %s: it is not a loopback address; pass --tls-cert/--tls-key or --tls-self-signed", o.Listen)
	}
	if o.MetricsListen != "" {
		host, _, err := net.SplitHostPort(o.MetricsListen)
		if err != nil {
			return fmt.Errorf("--metrics-listen %q: %w", o.MetricsListen, err)
		}
		if !isLoopback(host) {
			return fmt.Errorf("refusing to serve metrics without authentication on %s: it is not a loopback address (scrape GET /metrics on the API listener with a reader's token instead)", o.MetricsListen)
		}
	}
	if o.Store != "" && !store.IsPostgres(o.Store) && !strings.HasSuffix(o.Store, ".db") {
		return fmt.Errorf("--store %s: give a postgres:// URL, or a SQLite file ending in .db, or leave it empty for <data dir>/cumulus.db", store.Redact(o.Store))
	}
	if len(o.Replicas) > 0 {
		if _, err := endpoints.Parse(strings.Join(o.Replicas, ",")); err != nil {
			return fmt.Errorf("--replicas: %w", err)
		}
	}
	if o.LeaderLease != 0 && o.LeaderLease < time.Second {
		return errors.New("--leader-lease must be at least 1s")
	}
	if o.Quotas.FamilyCores < 0 || o.Quotas.TotalCores < 0 || o.Quotas.LowPriorityCores < 0 {
		return errors.New("quota limits may not be negative")
	}
	if err := server.CheckLocations(o.Locations, o.Defaults.Location); err != nil {
		return fmt.Errorf("--locations: %w", err)
	}
	if _, err := webhook.ParseAllow(o.WebhookAllow); err != nil {
		return fmt.Errorf("--webhook-allow: %w", err)
	}
	if o.Limits.WorkspaceRunData < 0 || o.Limits.WorkspaceBlobs < 0 || o.Limits.JobLog < 0 {
		return errors.New("--max-workspace-run-data, --max-workspace-blobs and --max-job-log may not be negative")
	}
	if o.MaxBlobSize < 0 || o.BlobGrace < 0 {
		return errors.New("--max-blob-size and --blob-grace may not be negative")
	}
	if o.EvictionRate < 0 {
		return errors.New("--eviction-rate may not be negative")
	}
	if o.BodyTimeout < 0 || o.UploadTimeout < 0 {
		return errors.New("--body-timeout and --upload-timeout may not be negative")
	}
	if err := o.validateUsage(); err != nil {
		return err
	}
	if _, err := gpu.ParseMatch(o.GPUModelMatch); err != nil {
		return fmt.Errorf("--gpu-model-match: %w", err)
	}
	switch {
	case o.NodeProvider != nil:
	case o.Provider == "local", o.Provider == "sim", o.Provider == "kubernetes", o.Provider == "slurm":
	case o.Provider == "docker":
		if o.NodeImage == "" {
			return errors.New("--provider docker needs a --node-image")
		}
	default:
		return fmt.Errorf("--provider %q is not one of: local, docker, kubernetes, slurm, sim", o.Provider)
	}
	return nil
}

// withDefaults fills in what the options leave to the daemon.
func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.NodesDir == "" {
		o.NodesDir = config.NodesDir(o.DataDir)
	}
	if o.PollTimeout > 0 && o.HeartbeatTimeout > 0 && o.PollTimeout >= o.HeartbeatTimeout {
		// An agent's held poll must come back well inside the heartbeat timeout.
		o.PollTimeout = o.HeartbeatTimeout / 3
	}
	return o
}

func (o Options) tls() bool { return o.TLSCert != "" || o.TLSSelfSigned }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Daemon is a running control plane.
type Daemon struct {
	URL    string // base URL clients use
	Token  string // admin token when minted by this start, else ""
	CAFile string // self-signed certificate, when used
	DB     *store.DB

	// MetricsURL is where the unauthenticated metrics listener serves
	// /metrics ("" without --metrics-listen).
	MetricsURL string

	srv *http.Server
	// bridges are the subnet bridges' addresses the API also serves on
	// (see bridgeListener).
	bmu       sync.Mutex
	bridges   map[string]bool
	bridgeIPs map[string]bool // every subnet bridge address agents reach the API at
	msrv      *http.Server    // the metrics listener, or nil
	hub       *hub.Hub
	ln        net.Listener
	prov      provider.Provider
	// replica is this process among the replicas of a PostgreSQL store
	// (nil on SQLite).
	replica *replica.Replica
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     *slog.Logger
}

// Start opens the store, mints the admin token on first start, writes the
// CLI config, and starts serving and the controllers.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	secureDataDir(o.DataDir, o.ConfigPath, o.Log)
	if err := addSizes(o.SizesFile, o.Log); err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, o.Store, o.DataDir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{DB: db, log: o.Log}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	box, err := secret.LoadOrCreateKey(filepath.Join(o.DataDir, "secret.key"))
	if err != nil {
		return nil, err
	}

	var tlsCfg *tls.Config
	var blobTLS server.BlobTLS
	switch {
	case o.TLSSelfSigned:
		d.CAFile = filepath.Join(o.DataDir, "tls.crt")
		cert, err := tlsutil.SelfSigned(d.CAFile, filepath.Join(o.DataDir, "tls.key"), o.Clock.Now())
		if err != nil {
			return nil, err
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		// The blob endpoints azure-ai-ml builds itself, answered as an
		// HTTPS proxy, get certificates from the same CA.
		if issuer, err := tlsutil.NewIssuer(cert, o.Clock.Now); err == nil {
			blobTLS = issuer.Issue
		} else {
			o.Log.Warn("no certificates for blob endpoints", "err", err)
		}
	case o.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load --tls-cert/--tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if tlsCfg != nil {
		tlsCfg.NextProtos = []string{"h2", "http/1.1"} // as ServeTLS offers them; the listener is ours (dualListener)
	}

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	d.ln = ln
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	host := ln.Addr().(*net.TCPAddr)
	urlHost := host.String()
	if tlsCfg != nil && o.TLSSelfSigned && host.IP.IsLoopback() {
		urlHost = fmt.Sprintf("localhost:%d", host.Port)
	}
	d.URL = scheme + "://" + urlHost
	if o.PublicURL != "" {
		d.URL = o.PublicURL
	}

	issuer, err := identity.Open(d.URL, filepath.Join(o.DataDir, "identity"), o.Clock.Now())
	if err != nil {
		ln.Close()
		return nil, err
	}
	h := hub.New()
	d.hub = h
	serverName := ""
	if u, err := url.Parse(d.URL); err == nil && tlsCfg != nil {
		serverName = u.Hostname()
	}
	controlPlane := d.bridgeListener(host, tlsCfg, serverName)
	prov, err := newProvider(ctx, o, d.CAFile, controlPlane)
	if err != nil {
		ln.Close()
		return nil, err
	}
	network, nw := networkEnforcement(prov, o)
	match, _ := gpu.ParseMatch(o.GPUModelMatch)
	machine := readMachine(ctx, prov, match, o.Log.With("component", "gpus"))
	prices := cost.Catalog()
	if o.PriceFile != "" {
		if prices, err = cost.Load(o.PriceFile); err != nil {
			ln.Close()
			return nil, err
		}
	}
	var api *server.Server
	m := metrics.New(metrics.Options{DB: db, Log: o.Log, GPUs: machine,
		Limits: func(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error) {
			return api.Limits(ctx, q, sub, loc) // set below, before anything serves
		}})
	db.SetObserver(m)
	agentURL := d.URL
	if len(o.Replicas) > 0 {
		agentURL = strings.Join(o.Replicas, ",")
	}
	if o.Provider == "slurm" {
		if why := agentURLOnLoopback(agentURL); why != "" {
			o.Log.Warn(why, "component", "provider", "provider", o.Provider)
		}
	}
	// The controllers, made afresh for each term of leadership (one term
	// for the life of a server on SQLite) on the store they may write.
	allow, _ := webhook.ParseAllow(o.WebhookAllow) // checked by Validate
	hooks := webhook.Policy{Allow: allow}
	newControllers := func(db *store.DB) controllers {
		clusters := &controller.Clusters{DB: db, Clock: o.Clock, Log: o.Log.With("component", "clusters"), Provider: prov, Hub: h,
			NewJoinToken: dispatch.NewNodeJoinToken, NewNodeID: dispatch.NewNodeID, ServerURL: agentURL, CAFile: d.CAFile,
			HeartbeatTimeout: o.HeartbeatTimeout, ProvisionTimeout: o.ProvisionTimeout, MaxAttempts: o.MaxAttempts,
			EvictionRate: o.EvictionRate, Metrics: m, Limits: api.Limits, GPUs: machine}
		clusters.Init()
		ops := &controller.Operations{DB: db, Clock: o.Clock, Log: o.Log.With("component", "operations"), Nodes: clusters, OnChange: clusters.Notify}
		ops.Init()
		events := &controller.EventRetention{DB: db, Clock: o.Clock, Keep: o.EventRetention, Log: o.Log.With("component", "events")}
		budgets := &controller.Budgets{DB: db, Clock: o.Clock, Prices: prices, Log: o.Log.With("component", "budgets"), Changed: clusters.Notify,
			Webhooks: hooks}
		sweeps := &controller.Sweeps{DB: db, Clock: o.Clock, Log: o.Log.With("component", "sweeps"), Changed: clusters.Notify, Wake: h.Wake}
		pipelines := &controller.Pipelines{DB: db, Clock: o.Clock, Log: o.Log.With("component", "pipelines"), Changed: clusters.Notify, Wake: h.Wake,
			Outputs: files.Outputs{Dir: filepath.Join(o.DataDir, "outputs")}, Blobs: files.Blobs{Dir: filepath.Join(o.DataDir, "blobs")}}
		return controllers{clusters, ops, events, budgets, sweeps, pipelines}
	}
	clustersN, opsN := &relay{}, &relay{}
	studio := ui.New(ui.Options{Reads: readmodel.New(db), CanRead: server.CanRead(db), Clock: o.Clock, Log: o.Log, PublicURL: o.PublicURL,
		ConfigPath:   o.configPath(),
		Subscription: o.Defaults.Subscription, ResourceGroup: o.Defaults.ResourceGroup, Workspace: o.Defaults.Workspace, Location: o.Defaults.Location})
	api = server.New(server.Config{Defaults: o.Defaults, Quotas: o.Quotas, PublicURL: o.PublicURL, DataDir: o.DataDir,
		Locations: o.Locations, MaxBlobSize: o.MaxBlobSize, BlobGrace: o.BlobGrace,
		PollTimeout: o.PollTimeout, HeartbeatInterval: o.PollTimeout / 2, MaxAttempts: o.MaxAttempts,
		BodyTimeout: o.BodyTimeout, UploadTimeout: o.UploadTimeout, Prices: prices, UsageInterval: o.UsageInterval,
		Network: network, GPUs: machine, Webhooks: hooks, Limits: o.Limits, CheckCompute: computeCheck(prov)},
		server.Deps{DB: db, Box: box, Clock: o.Clock, Log: o.Log, Ops: opsN, Clusters: clustersN, Hub: h, Identity: issuer, UI: studio, Sessions: studio,
			Metrics: m, BlobTLS: blobTLS})
	if err := api.EnsureDefaults(ctx); err != nil {
		ln.Close()
		return nil, fmt.Errorf("default workspace: %w", err)
	}
	if err := d.ensureAdmin(ctx, o); err != nil {
		ln.Close()
		return nil, err
	}

	// No ReadTimeout: one bound for every request would cut off large
	// uploads; the server bounds each request's body itself (BodyTimeout,
	// UploadTimeout). No WriteTimeout: it would cut off agents' held polls
	// and long downloads.
	var handler http.Handler = api
	if tlsCfg != nil {
		handler = plainAgents(api, tlsCfg.Certificates[0], serverName, d.URL)
	}
	d.srv = &http.Server{Handler: handler, TLSConfig: tlsCfg, ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn)}
	if o.Provider == "sim" && o.SimHTTP2 {
		// Tens of thousands of simulated agents each hold a poll: over
		// HTTP/1.1 that is a connection (two descriptors in this process)
		// each. HTTP/2 carries a thousand polls on one connection.
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		d.srv.Protocols = &p
		d.srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	}
	if nw != nil {
		for _, ip := range nw.BridgeAddrs() { // nodes in subnets from before a restart
			if _, err := controlPlane(ip); err != nil {
				o.Log.Warn("serve the nodes of a subnet", "err", err)
			}
		}
	}
	var mln net.Listener
	if o.MetricsListen != "" {
		if mln, err = net.Listen("tcp", o.MetricsListen); err != nil {
			ln.Close()
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		d.msrv = &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
			MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn)}
		d.MetricsURL = "http://" + mln.Addr().String()
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	d.prov = prov
	if d.msrv != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.msrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				o.Log.Error("serve metrics", "err", err)
			}
		}()
	}
	d.wg.Add(4)
	go func() {
		defer d.wg.Done()
		var err error
		if tlsCfg != nil {
			err = d.srv.Serve(newDualListener(ln, tlsCfg, d.plainOK))
		} else {
			err = d.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("serve", "err", err)
		}
	}()
	go func() {
		defer d.wg.Done()
		studio.Run(runCtx) // samples node counts for the studio's chart
	}()
	go func() {
		defer d.wg.Done()
		api.RunUsage(runCtx) // writes the utilization samples this replica's agents send
	}()
	// lead runs the controllers on db until ctx ends.
	lead := func(ctx context.Context, db *store.DB) {
		c := newControllers(db)
		clustersN.setLocal(fanOut{c.clusters, c.budgets, c.sweeps, c.pipelines}) // a budget changed: judged soon
		opsN.setLocal(c.ops)
		defer clustersN.setLocal(nil)
		defer opsN.setLocal(nil)
		defer startUsagePruning(ctx, db, o)()
		runControllers(ctx, c, api, o.Log)
	}
	go func() {
		defer d.wg.Done()
		if db.Engine() != "postgres" {
			lead(runCtx, db)
			return
		}
		r := replica.New(replica.Options{DB: db, DSN: o.Store, Hub: h, Clock: o.Clock, Log: o.Log.With("component", "replica"),
			Lease: o.LeaderLease, HeartbeatTimeout: o.HeartbeatTimeout, Lead: lead,
			OnChanged: func(what string) {
				if what == replica.Operations {
					opsN.notifyLocal()
				}
				clustersN.notifyLocal()
			}})
		clustersN.setRemote(func() { r.Changed(replica.Clusters) })
		opsN.setRemote(func() { r.Changed(replica.Operations) })
		d.replica = r
		r.Run(runCtx)
	}()
	ok = true
	o.Log.Info("cumulus control plane started", "url", d.URL, "data_dir", o.DataDir, "store", db.Engine(), "metrics_url", d.MetricsURL)
	return d, nil
}

// plainOK reports whether a connection to the local address a may speak
// plain HTTP to a TLS server (see plainAgents): a loopback or subnet
// bridge address, where the agents that joined over plain HTTP are.
func (d *Daemon) plainOK(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	if t.IP.IsLoopback() {
		return true
	}
	d.bmu.Lock()
	defer d.bmu.Unlock()
	return d.bridgeIPs[t.IP.String()]
}

// configPath is the CLI config the server writes its admin token to.
func (o Options) configPath() string {
	if o.ConfigPath != "" {
		return o.ConfigPath
	}
	return filepath.Join(o.DataDir, "config.yaml")
}

// ensureAdmin mints the admin token on a fresh store (or when asked) and
// writes the CLI config so the CLI works with no setup.
func (d *Daemon) ensureAdmin(ctx context.Context, o Options) error {
	path := o.configPath()
	servers := d.URL
	if len(o.Replicas) > 0 {
		servers = strings.Join(o.Replicas, ",")
	}
	var tok string
	var err error
	if o.NewAdminToken {
		tok, err = server.MintAdminToken(ctx, d.DB, o.Clock.Now())
	} else {
		tok, err = server.EnsureAdminToken(ctx, d.DB, o.Clock.Now())
	}
	if err != nil {
		return err
	}
	cfg, lerr := config.Load(path)
	if tok == "" {
		if lerr != nil {
			o.Log.Warn("the store already has an admin token but the CLI config is missing; run 'cumulus serve --new-admin-token' to mint a new one", "config", path)
			return nil
		}
		if cfg.Server == servers && cfg.CAFile == d.CAFile {
			return nil
		}
		tok = cfg.Token // keep the token, refresh where the server is
	}
	d.Token = tok
	cfg = config.CLI{Server: servers, Token: tok, CAFile: d.CAFile, Subscription: o.Defaults.Subscription,
		ResourceGroup: o.Defaults.ResourceGroup, Workspace: o.Defaults.Workspace, Location: o.Defaults.Location}
	if err := config.Save(path, cfg); err != nil {
		return err
	}
	o.Log.Info("CLI configuration written", "config", path)
	return nil
}

// Close stops serving (letting requests in flight finish) and the controllers.
func (d *Daemon) Close(ctx context.Context) error {
	d.hub.Close() // held agent polls answer now instead of holding Shutdown up
	err := d.srv.Shutdown(ctx)
	if d.msrv != nil {
		if merr := d.msrv.Shutdown(ctx); err == nil {
			err = merr
		}
	}
	d.cancel()
	d.wg.Wait()
	if c, ok := d.prov.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := d.DB.Close(); err == nil {
		err = cerr
	}
	return err
}

// newProvider builds the configured node provider. For docker it makes
// sure the node image exists first: built from this binary when missing.
func newProvider(ctx context.Context, o Options, caFile string, controlPlane provider.ControlPlane) (provider.Provider, error) {
	if o.NodeProvider != nil {
		return o.NodeProvider, nil
	}
	log := o.Log.With("component", "provider", "provider", o.Provider)
	switch o.Provider {
	case "local":
		if err := nodesOutsideData(o.NodesDir, o.DataDir); err != nil {
			return nil, err
		}
		prov := local.New(local.Options{BaseDir: o.NodesDir, AgentCommand: o.AgentCommand, JobUsersDir: o.JobUsersDir,
			JobsAsServerUser: o.JobsAsServerUser, ProcessPerNode: o.ProcessPerNode, Log: log, ControlPlane: controlPlane})
		if ok, why := prov.Isolation(); !ok {
			log.Warn("jobs are not isolated from the control plane: " + why)
		}
		if old, _ := filepath.Glob(filepath.Join(o.DataDir, "nodes", "*", "agent.pid")); len(old) > 0 {
			log.Warn("node folders of an earlier version are in the data dir; their agents are no longer managed: stop them and remove the folder",
				"folder", filepath.Join(o.DataDir, "nodes"), "nodesDir", o.NodesDir)
		}
		return prov, nil
	case "docker":
		if err := nodeimage.Ensure(ctx, o.NodeImage, log); err != nil {
			return nil, fmt.Errorf("docker provider: %w", err)
		}
		return docker.New(docker.Options{Image: o.NodeImage, BaseDir: filepath.Join(o.DataDir, "nodes"), Log: log,
			ControlPlane: controlPlane}), nil
	case "kubernetes":
		return newKubernetesProvider(ctx, o, caFile, log)
	case "slurm":
		return newSlurmProvider(ctx, o, log)
	case "sim":
		ca := ""
		if o.TLSSelfSigned {
			ca = filepath.Join(o.DataDir, "tls.crt") // written by Start before the provider is made
		}
		return sim.New(sim.Options{JobDuration: o.SimJobDuration, CAFile: ca, HTTP2: o.SimHTTP2, Host: o.SimHost, Log: log})
	}
	return nil, fmt.Errorf("unknown provider %q", o.Provider)
}

// nodesOutsideData refuses a nodes dir inside the data dir (or the other
// way round): jobs run in the node folders and must not reach the state.
func nodesOutsideData(nodes, data string) error {
	n, err := filepath.Abs(nodes)
	if err != nil {
		return fmt.Errorf("--nodes-dir: %w", err)
	}
	d, err := filepath.Abs(data)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if n == d || strings.HasPrefix(n, d+string(filepath.Separator)) || strings.HasPrefix(d, n+string(filepath.Separator)) {
		return fmt.Errorf("--nodes-dir %s must lie outside the data dir %s (jobs run there)", nodes, data)
	}
	return nil
}

// newKubernetesProvider connects to the Kubernetes API server and hands
// agents the control plane's CA (when it has its own) through node secrets.
func newKubernetesProvider(ctx context.Context, o Options, caFile string, log *slog.Logger) (provider.Provider, error) {
	cfg, ns, err := kubernetes.LoadConfig(o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider: %w", err)
	}
	if o.KubeNamespace != "" {
		ns = o.KubeNamespace
	}
	var ca []byte
	if caFile != "" {
		if ca, err = os.ReadFile(caFile); err != nil {
			return nil, fmt.Errorf("kubernetes provider: CA for agents: %w", err)
		}
	}
	owner, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(ctx, kubernetes.Options{Config: cfg, Namespace: ns, Image: o.NodeImage, Owner: owner, CAPEM: ca, Log: log})
}

// bridgeListener returns the hook with which the local and docker
// providers have the API served on a subnet bridge's address, for the
// agents of the nodes in that subnet: the same handler on the server's
// port at that address (nothing new where the server listens on every
// address), with the server's TLS when it has TLS. Its certificate does
// not name the bridge's address, so the agents check it for the name in
// the server's URL instead (serverName).
func (d *Daemon) bridgeListener(host *net.TCPAddr, tlsCfg *tls.Config, serverName string) provider.ControlPlane {
	return func(ip string) (provider.Endpoint, error) {
		addr := net.JoinHostPort(ip, strconv.Itoa(host.Port))
		ep := provider.Endpoint{URL: "http://" + addr}
		if tlsCfg != nil {
			ep = provider.Endpoint{URL: "https://" + addr, TLSServerName: serverName}
		}
		d.bmu.Lock()
		defer d.bmu.Unlock()
		if d.bridgeIPs == nil {
			d.bridgeIPs = map[string]bool{}
		}
		d.bridgeIPs[ip] = true
		if host.IP.IsUnspecified() {
			return ep, nil // the main listener serves every address
		}
		if d.bridges[addr] {
			return ep, nil
		}
		if d.srv == nil {
			return ep, errors.New("the control plane does not serve yet")
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return ep, fmt.Errorf("serve the control plane on %s for a subnet's nodes: %w", addr, err)
		}
		if d.bridges == nil {
			d.bridges = map[string]bool{}
		}
		d.bridges[addr] = true
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			serve := func() error { return d.srv.Serve(ln) }
			if tlsCfg != nil {
				serve = func() error { return d.srv.Serve(newDualListener(ln, tlsCfg, d.plainOK)) }
			}
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("serve a subnet's bridge", "addr", addr, "err", err)
			}
		}()
		d.log.Info("serving the nodes of a subnet", "addr", addr)
		return ep, nil
	}
}
