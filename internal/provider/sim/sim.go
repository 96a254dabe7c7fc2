// Package sim is a node provider whose nodes are simulated agents, inside
// the control plane's process or all in one process of their own
// (Options.Host): each node is a goroutine that registers with its join
// token and long-polls over real HTTP like the real agent, and "runs" an
// assignment by reporting it running, waiting, and reporting it exited 0.
// It exercises the real server, store, scheduler, autoscaler and API at
// scale without a process a node (benchmarks, `cumulus serve --provider
// sim`).
package sim

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/endpoints"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
)

// DurationEnv is the job environment variable that overrides how long a
// simulated job runs (a Go duration, e.g. "250ms").
const DurationEnv = "SIM_JOB_DURATION" // not CUMULUS_…: the API reserves that prefix for the node

// Options configure the provider.
type Options struct {
	// JobDuration is how long a simulated job runs unless its environment
	// sets DurationEnv.
	JobDuration time.Duration
	// Client is the HTTP client every node shares; nil makes one with a
	// transport that keeps many idle connections to the server.
	Client *http.Client
	// CAFile is trusted for https server URLs when Client is nil.
	CAFile string
	// HTTP2: when Client is nil, the nodes share HTTP/2 connections (an
	// http:// server must accept HTTP/2 without TLS) instead of holding an
	// HTTP/1.1 connection each.
	HTTP2 bool
	// Host, when set, is a command (its arguments after it) that runs the
	// nodes in a process of its own (ServeHost, e.g. `cumulus agent
	// --sim-host`); the provider starts it on its first node.
	Host []string
	Log  *slog.Logger
}

// Provider runs simulated nodes.
type Provider struct {
	o  Options
	hc *http.Client

	mu    sync.Mutex
	nodes map[string]*node
	// With Options.Host: the running host process (nil before the first
	// node and after it exited) and the nodes asked of it.
	host    *host
	remotes map[string]*remote
}

var _ provider.Provider = (*Provider)(nil)

// New makes a sim provider.
func New(o Options) (*Provider, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	hc := o.Client
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = 4096
		if o.HTTP2 {
			var p http.Protocols
			p.SetHTTP2(true)
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = &p
		}
		if o.CAFile != "" {
			pool, err := tlsutil.Pool(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("sim provider: %w", err)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		hc = &http.Client{Transport: tr}
	}
	return &Provider{o: o, hc: hc, nodes: map[string]*node{}, remotes: map[string]*remote{}}, nil
}

// Name is "sim".
func (p *Provider) Name() string { return "sim" }

// Create starts the node's simulated agent; a node that exists keeps its id.
func (p *Provider) Create(_ context.Context, spec provider.NodeSpec) (string, error) {
	servers, err := endpoints.New(spec.ServerURL)
	if err != nil {
		return "", provider.Configurationf("sim: %w", err)
	}
	if len(p.o.Host) > 0 {
		return p.createRemote(spec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.nodes[spec.NodeID]; ok {
		return n.providerID(), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{p: p, spec: spec, servers: servers, cancel: cancel,
		done: make(chan struct{}), jobs: map[string]*simJob{},
		log: p.o.Log.With("node", spec.NodeID)}
	p.nodes[spec.NodeID] = n
	go n.run(ctx)
	return n.providerID(), nil
}

// Delete stops the node's agent (its jobs stop with it).
func (p *Provider) Delete(_ context.Context, nodeID string) error {
	if len(p.o.Host) > 0 {
		return p.deleteRemote(nodeID)
	}
	p.mu.Lock()
	n, ok := p.nodes[nodeID]
	delete(p.nodes, nodeID)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	n.cancel()
	<-n.done
	return nil
}

// List returns the nodes this provider started; a node whose agent gave
// up (told it is unknown or to shut down) shows as not running.
func (p *Provider) List(context.Context) ([]provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provider.Instance, 0, len(p.nodes)+len(p.remotes))
	for id, n := range p.nodes {
		out = append(out, provider.Instance{NodeID: id, ProviderID: n.providerID(), Running: !ended(n.done)})
	}
	for id, n := range p.remotes {
		out = append(out, provider.Instance{NodeID: id, ProviderID: providerID(id), Running: !ended(n.done)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// Close stops every node.
func (p *Provider) Close() {
	p.mu.Lock()
	ids := make([]string, 0, len(p.nodes))
	for id := range p.nodes {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		_ = p.Delete(context.Background(), id)
	}
	p.closeHost()
}

type node struct {
	p       *Provider
	spec    provider.NodeSpec
	servers *endpoints.List // the control plane's replicas
	cancel  context.CancelFunc
	done    chan struct{}
	log     *slog.Logger

	mu    sync.Mutex
	token string
	jobs  map[string]*simJob // by uid
}

type simJob struct {
	state  agentapi.JobState
	cancel context.CancelFunc
}

func (n *node) providerID() string { return providerID(n.spec.NodeID) }

// providerID is the provider's id of node nodeID.
func providerID(nodeID string) string { return "sim-" + nodeID }

func (n *node) run(ctx context.Context) {
	defer close(n.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	var reg agentapi.RegisterResponse
	for {
		err := n.call(ctx, "/register", n.spec.JoinToken,
			agentapi.RegisterRequest{NodeID: n.spec.NodeID, Hostname: n.spec.NodeID, Address: "127.0.0.1", AgentVersion: "sim"}, &reg)
		if err == nil {
			break
		}
		n.log.Debug("sim node register failed; retrying", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
	n.mu.Lock()
	n.token = reg.NodeToken
	n.mu.Unlock()
	for ctx.Err() == nil {
		req := agentapi.PollRequest{NodeID: reg.NodeID, Jobs: n.states()}
		var resp agentapi.PollResponse
		err := n.call(ctx, "/poll", "", req, &resp)
		if errors.Is(err, errRefused) {
			// The server refuses the node token it gave: it has no record
			// of this node (it answers unknown nodes so), as Unknown.
			n.stopAll("shutdown")
			return
		}
		if err != nil {
			n.log.Debug("sim node poll failed", "err", err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if resp.Unknown || resp.Shutdown {
			n.stopAll("shutdown")
			return
		}
		n.forgetReported(req.Jobs)
		for _, uid := range append(resp.Cancel, resp.Preempt...) {
			n.stop(uid)
		}
		if a := resp.Assign; a != nil {
			n.start(ctx, &wg, *a)
		}
	}
	n.stopAll("shutdown")
}

// start runs one assignment (idempotent by uid and attempt).
func (n *node) start(ctx context.Context, wg *sync.WaitGroup, a agentapi.Assignment) {
	n.mu.Lock()
	if j, ok := n.jobs[a.UID]; ok && j.state.Attempt == a.Attempt {
		n.mu.Unlock()
		return
	}
	d := n.p.o.JobDuration
	if v, ok := a.Env[DurationEnv]; ok {
		if pd, err := time.ParseDuration(v); err == nil {
			d = pd
		}
	}
	now := time.Now().UTC()
	if d <= 0 {
		// A job that takes no time has ended before anyone could be told
		// it runs: the next poll carries its start and its end, and that
		// one round trip also brings the next assignment (no events).
		n.jobs[a.UID] = &simJob{cancel: func() {}, state: agentapi.JobState{UID: a.UID, Attempt: a.Attempt,
			Phase: agentapi.PhaseExited, Started: now, Ended: now}}
		n.mu.Unlock()
		return
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &simJob{cancel: cancel, state: agentapi.JobState{UID: a.UID, Attempt: a.Attempt, Phase: agentapi.PhaseRunning,
		Started: now}}
	n.jobs[a.UID] = j
	st := j.state
	n.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.event(ctx, st)
		code, reason := 0, ""
		if !sleep(jctx, d) {
			code, reason = 143, "canceled"
		}
		n.mu.Lock()
		j.state.Phase, j.state.ExitCode, j.state.Reason, j.state.Ended = agentapi.PhaseExited, code, reason, time.Now().UTC()
		st := j.state
		n.mu.Unlock()
		if ctx.Err() == nil {
			n.event(ctx, st)
		}
	}()
}

func (n *node) stop(uid string) {
	n.mu.Lock()
	j, ok := n.jobs[uid]
	n.mu.Unlock()
	if ok {
		j.cancel()
	}
}

func (n *node) stopAll(string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, j := range n.jobs {
		j.cancel()
	}
}

// forgetReported drops the exited jobs whose end a poll has carried.
func (n *node) forgetReported(carried []agentapi.JobState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range carried {
		if j, ok := n.jobs[st.UID]; ok && st.Phase == agentapi.PhaseExited && j.state.Attempt == st.Attempt {
			delete(n.jobs, st.UID)
		}
	}
}

func (n *node) states() []agentapi.JobState {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []agentapi.JobState
	for _, j := range n.jobs {
		out = append(out, j.state)
	}
	return out
}

// event reports a phase change, retrying a few times.
func (n *node) event(ctx context.Context, st agentapi.JobState) {
	for i := 0; i < 5; i++ {
		err := n.call(ctx, "/jobs/"+url.PathEscape(st.UID)+"/events", "", st, nil)
		if err == nil || ctx.Err() != nil {
			return
		}
		n.log.Debug("sim job event failed", "job", st.UID, "err", err)
		if !sleep(ctx, 200*time.Millisecond) {
			return
		}
	}
}

// call POSTs a JSON body to the agent API and decodes the answer.
func (n *node) call(ctx context.Context, path, token string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if token == "" {
		n.mu.Lock()
		token = n.token
		n.mu.Unlock()
	}
	resp, err := n.servers.Do(n.p.hc, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+agentapi.Prefix+path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		return req, nil
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(msg)))
		if resp.StatusCode == http.StatusUnauthorized {
			err = fmt.Errorf("%w: %w", errRefused, err)
		}
		return err
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// ended says whether done is closed.
func ended(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// errRefused marks a 401: the server refuses the node's token.
var errRefused = errors.New("the server refuses the node token")

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
