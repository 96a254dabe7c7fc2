// Package metrics is Cumulus's Prometheus instrumentation: one registry,
// the collector that reads cluster, quota and job gauges from the store at
// scrape time, and the counters and histograms that the store, the
// controllers and the API feed as things happen. The daemon assembles it;
// pure packages (decide, actuate, api, …) never see it.
//
// A nil *Metrics records nothing, so code that is run without metrics
// (tests, the simulator) needs no checks.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/metrics/promtext"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Namespace prefixes every Cumulus metric.
const Namespace = "cumulus"

// Reasons of cumulus_node_provision_failures_total: a bounded set.
const (
	// ReasonCreate: the provider refused to create the machine.
	ReasonCreate = "create_error"
	// ReasonCapacity: the provider had no capacity for the node
	// (provider.InsufficientCapacityError).
	ReasonCapacity = "insufficient_capacity"
	// ReasonConfiguration: the provider refused the compute's or its own
	// configuration (provider.ConfigurationError).
	ReasonConfiguration = "configuration"
	// ReasonTimeout: the node's agent did not register within the
	// provisioning timeout.
	ReasonTimeout = "timeout"
	// ReasonGone: the provider reported the machine gone before its agent
	// registered.
	ReasonGone = "machine_gone"
)

// Options are what the metrics read at scrape time.
type Options struct {
	DB *store.DB
	// Limits returns the quota limits of a subscription's location (the
	// server's, as the controller uses); nil: no quota metrics.
	Limits func(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error)
	Log    *slog.Logger
	// ScrapeTimeout bounds the store reads of one scrape (default 10 s).
	ScrapeTimeout time.Duration
	// GPUs, when set, are the devices of the machine the provider's nodes
	// share: cumulus_node_gpu_held says which node holds which.
	GPUs *gpu.Machine
}

// Metrics holds the registry and the metrics fed as things happen.
type Metrics struct {
	reg           promtext.Registry
	log           *slog.Logger
	handler       http.Handler
	scrapeTimeout time.Duration

	jobTransitions    *promtext.CounterVec   // to
	jobQueue          *promtext.HistogramVec // submit → first running
	nodeProvision     *promtext.HistogramVec // workspace, compute
	scaleUps          *promtext.CounterVec   // workspace, compute
	scaleDowns        *promtext.CounterVec   // workspace, compute
	preemptions       *promtext.CounterVec   // workspace, compute
	jobPreemptions    *promtext.CounterVec   // workspace, compute, reason
	provisionFailures *promtext.CounterVec   // workspace, compute, reason
	pass              *promtext.HistogramVec
	requests          *promtext.HistogramVec // method, route, code
	txs               *promtext.HistogramVec // outcome
}

// New makes the registry with the Go and process collectors, the store
// collector and the event metrics.
func New(o Options) *Metrics {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 10 * time.Second
	}
	m := &Metrics{log: o.Log.With("component", "metrics"), scrapeTimeout: o.ScrapeTimeout}
	m.jobTransitions = promtext.NewCounterVec(Namespace+"_job_transitions_total",
		"Job status changes, by the status changed to (a new job counts as a change to its first status).",
		"to")
	m.jobQueue = promtext.NewHistogramVec(Namespace+"_job_queue_seconds",
		"Time from a job's submission to its first start (Running).",
		[]float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400})
	m.nodeProvision = promtext.NewHistogramVec(Namespace+"_node_provision_seconds",
		"Time from a node's request to its agent's registration (allocation and boot).",
		[]float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1800}, "workspace", "compute")
	m.scaleUps = promtext.NewCounterVec(Namespace+"_scale_ups_total",
		"Nodes the controller requested from the provider (a request the provider refused counts too).",
		"workspace", "compute")
	m.scaleDowns = promtext.NewCounterVec(Namespace+"_scale_downs_total",
		"Nodes the controller removed: idle past their idle time, above the target, unusable or preempted.",
		"workspace", "compute")
	m.preemptions = promtext.NewCounterVec(Namespace+"_preemptions_total",
		"Low-priority nodes preempted.",
		"workspace", "compute")
	m.jobPreemptions = promtext.NewCounterVec(Namespace+"_job_preemptions_total",
		"Running jobs the queue policy stopped and queued again for a waiting job, by reason: lower_priority (the waiting job's priority is higher), over_share (the stopped job's group was over its fair share, the waiting job's under).",
		"workspace", "compute", "reason")
	m.provisionFailures = promtext.NewCounterVec(Namespace+"_node_provision_failures_total",
		"Nodes that could not be provisioned, by reason: insufficient_capacity (the provider had no room), configuration (the provider refused the settings), create_error (the provider failed otherwise), timeout (the agent did not register in time), machine_gone (the machine went away before its agent registered).",
		"workspace", "compute", "reason")
	m.pass = promtext.NewHistogramVec(Namespace+"_controller_pass_seconds",
		"Duration of one cluster controller pass over every cluster.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10})
	m.requests = promtext.NewHistogramVec(Namespace+"_api_request_duration_seconds",
		"API requests, by method, route pattern and status code.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "method", "route", "code")
	m.txs = promtext.NewHistogramVec(Namespace+"_store_transaction_seconds",
		"Store transactions, from begin to commit or rollback, by outcome (committed, rolled_back).",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}, "outcome")
	m.reg.Register(promtext.Runtime{},
		m.jobTransitions, m.jobQueue, m.nodeProvision, m.scaleUps, m.scaleDowns, m.preemptions, m.jobPreemptions, m.provisionFailures,
		m.pass, m.requests, m.txs)
	if o.DB != nil {
		m.reg.Register(&collector{db: o.DB, limits: o.Limits})
		if o.GPUs != nil && len(o.GPUs.Devices) > 0 {
			m.reg.Register(&gpuCollector{db: o.DB, machine: *o.GPUs})
		}
	}
	m.handler = &handler{m: m, db: o.DB}
	return m
}

// Names are the names of every family the exposition may hold.
func (m *Metrics) Names() []string {
	return append(m.reg.Names(), UsageMetricNames()...)
}

// Handler serves the exposition, as text: the registry's families and
// the node and job utilization (usage.go). A store read that fails makes
// the scrape fail (500): a partial exposition would read as zeros.
func (m *Metrics) Handler() http.Handler { return m.handler }

// labels are a compute id's workspace and name; ids that are not a
// compute's give their whole text as the compute.
func labels(computeID string) (workspace, compute string) {
	sc, name, err := api.ParseComputeID(computeID, api.Scope{})
	if err != nil {
		return "", computeID
	}
	return sc.Workspace, name
}

// TxDone records a store transaction (store.Observer).
func (m *Metrics) TxDone(d time.Duration, committed bool) {
	if m == nil {
		return
	}
	outcome := "committed"
	if !committed {
		outcome = "rolled_back"
	}
	m.txs.WithLabelValues(outcome).Observe(d.Seconds())
}

// JobTransition records a job's status change (store.Observer).
func (m *Metrics) JobTransition(t store.JobTransition) {
	if m == nil || t.Compute == "" { // a sweep: its trials are the jobs that queue and run
		return
	}
	m.jobTransitions.WithLabelValues(t.To).Inc()
	if t.To == api.JobRunning && t.Queued > 0 {
		m.jobQueue.WithLabelValues().Observe(t.Queued.Seconds())
	}
}

// NodeTransition records a node's state change (store.Observer): its
// provisioning time when its agent registered, and preemptions.
func (m *Metrics) NodeTransition(t store.NodeTransition) {
	if m == nil {
		return
	}
	switch {
	case t.Provisioned > 0:
		ws, c := labels(t.Compute)
		m.nodeProvision.WithLabelValues(ws, c).Observe(t.Provisioned.Seconds())
	case t.To == api.NodePreempted:
		ws, c := labels(t.Compute)
		m.preemptions.WithLabelValues(ws, c).Inc()
	}
}

var _ store.Observer = (*Metrics)(nil)

// ScaledUp records n nodes requested for a compute.
func (m *Metrics) ScaledUp(computeID string, n int) {
	if m == nil || n <= 0 {
		return
	}
	ws, c := labels(computeID)
	m.scaleUps.WithLabelValues(ws, c).Add(float64(n))
}

// ScaledDown records a node removed from a compute by the autoscaler.
func (m *Metrics) ScaledDown(computeID string) {
	if m == nil {
		return
	}
	ws, c := labels(computeID)
	m.scaleDowns.WithLabelValues(ws, c).Inc()
}

// ProvisionFailed records a node of a compute that could not be
// provisioned; reason is one of the Reason constants (any other counts
// as "other").
func (m *Metrics) ProvisionFailed(computeID, reason string) {
	if m == nil {
		return
	}
	switch reason {
	case ReasonCreate, ReasonCapacity, ReasonConfiguration, ReasonTimeout, ReasonGone:
	default:
		reason = "other"
	}
	ws, c := labels(computeID)
	m.provisionFailures.WithLabelValues(ws, c, reason).Inc()
}

// JobPreempted records a running job that the queue policy of a compute
// stopped for a waiting one; kind is api.PreemptLowerPriority or
// api.PreemptOverShare.
func (m *Metrics) JobPreempted(computeID, kind string) {
	if m == nil {
		return
	}
	reason := "over_share"
	if kind == api.PreemptLowerPriority {
		reason = "lower_priority"
	}
	ws, c := labels(computeID)
	m.jobPreemptions.WithLabelValues(ws, c, reason).Inc()
}

// Pass records one cluster controller pass.
func (m *Metrics) Pass(d time.Duration) {
	if m == nil {
		return
	}
	m.pass.WithLabelValues().Observe(d.Seconds())
}

// Request records one API request by its route pattern (never the raw
// path: that would make a series per resource).
func (m *Metrics) Request(method, route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Observe(d.Seconds())
}
