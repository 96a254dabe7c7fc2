package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// A node host runs the agents of several nodes of one machine in one
// process: each node is Run with a Config of its own (its identity, work
// dir, job user, cgroup, devices and log), so its jobs are as isolated as
// under an agent of its own; what the nodes share is the process, so the
// Go runtime, the binary's package inits and the heap the agent keeps
// between jobs are paid once rather than once per node (each agent
// process held about 2.5 MB of memory of its own, idle, and twice that
// once it had run jobs).
//
// The local provider starts one host per compute, detached like an agent
// (it outlives the server), and tells it over a unix socket in its folder
// which nodes to run and to stop (HostClient). A node's work dir is
// locked (flock on hostLockName beside it) while the host runs it, which
// is how the provider tells a live node from one whose host died.
//
// A crash or kill of the host is a crash of each of its nodes: their jobs'
// inits get the parent-death signal and end their jobs, as when a node's
// own agent dies, and the control plane requeues them (the provider
// reports each node gone). The blast radius is one compute's nodes on one
// machine.

// Files of a host's folder and of its nodes'.
const (
	hostSocketName = "host.sock"
	hostLockName   = "agent.lock" // beside a hosted node's work dir
)

// HostNode is a node a host is told to run: what Config takes from the
// command line and environment for an agent of its own.
type HostNode struct {
	NodeID        string `json:"nodeID"`
	WorkDir       string `json:"workDir"`
	ServerURL     string `json:"serverURL"`
	JoinToken     string `json:"joinToken"`
	Address       string `json:"address,omitempty"`
	CAFile        string `json:"caFile,omitempty"`
	TLSServerName string `json:"tlsServerName,omitempty"`
	VCPUs         int    `json:"vcpus,omitempty"`
	MemoryMB      int    `json:"memoryMB,omitempty"`
	GPUDevices    string `json:"gpuDevices,omitempty"`
	JobUser       string `json:"jobUser,omitempty"`
	LogFile       string `json:"logFile"` // the node's own log
}

// errHostClosing is the answer to a start on a host that is exiting (its
// last node stopped a while ago): its client starts a new host.
var errHostClosing = errors.New("the node host is exiting")

// hostRequest is one request on a host's socket; hostReply its answer.
type hostRequest struct {
	Op    string        `json:"op"` // start, stop, nodes
	Node  *HostNode     `json:"node,omitempty"`
	ID    string        `json:"id,omitempty"`
	Grace time.Duration `json:"grace,omitempty"`
}

type hostReply struct {
	Error string   `json:"error,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	PID   int      `json:"pid,omitempty"`
}

// HostConfig configures a host.
type HostConfig struct {
	Dir string // its folder: the socket and its log
	// Base is each node's Config before its own settings (container
	// runtime, log level and format come from the host's command line).
	Base Config
	// Level and JSON are the nodes' log level and format.
	Level slog.Level
	JSON  bool
	Log   *slog.Logger // the host's own log
}

// hostedNode is a node a host runs.
type hostedNode struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	lock   *os.File
	logf   *os.File
}

// Host serves a node host's socket until ctx ends (SIGTERM: its nodes
// stop as an agent stops, their jobs reported) or its last node has
// stopped. It takes the folder's socket; a second host of the same folder
// fails.
func Host(ctx context.Context, hc HostConfig) error {
	if hc.Log == nil {
		hc.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(hc.Dir, 0o700); err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	sock := filepath.Join(hc.Dir, hostSocketName)
	addr, release, err := socketAddr(sock)
	if err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	if c, err := net.Dial("unix", addr); err == nil {
		c.Close()
		release()
		return fmt.Errorf("node host: %s is served already", sock)
	}
	os.Remove(sock) // a dead host's
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	release()
	if err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	// A host that exits leaves its socket file: the next host of the
	// folder, which may already serve it, removes a stale one itself.
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	h := &host{cfg: hc, nodes: map[string]*hostedNode{}, empty: make(chan struct{}, 1), ctx: ctx}
	go func() {
		for {
			select {
			case <-ctx.Done():
				ln.Close()
				return
			case <-h.empty:
			}
			// The last node stopped: the host goes unless another comes
			// meanwhile (a compute scaled down and up again).
			select {
			case <-ctx.Done():
			case <-time.After(hostIdleExit):
			}
			h.mu.Lock()
			idle := len(h.nodes) == 0
			if idle {
				h.closing = true // a start from now on is refused: its client starts a new host
			}
			h.mu.Unlock()
			if idle || ctx.Err() != nil {
				ln.Close()
				return
			}
		}
	}()
	var conns sync.WaitGroup
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			h.serve(c)
		}()
	}
	h.stopAll()
	// Answers on their way are delivered (a client closes its connection
	// once it has read its answer), within a bound.
	done := make(chan struct{})
	go func() { conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// hostIdleExit is how long a host with no node left waits for another
// before it exits.
const hostIdleExit = 3 * time.Second

type host struct {
	cfg     HostConfig
	ctx     context.Context
	mu      sync.Mutex
	nodes   map[string]*hostedNode
	empty   chan struct{} // the last node stopped: the host exits, unless another starts
	closing bool          // the host is exiting: no node starts any more
}

// serve answers one connection's requests, one JSON line each.
func (h *host) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req hostRequest
		var rep hostReply
		if err := json.Unmarshal(line, &req); err != nil {
			rep.Error = "bad request: " + err.Error()
		} else {
			switch req.Op {
			case "start":
				err = h.start(req.Node)
			case "stop":
				err = h.stop(req.ID, req.Grace)
			case "nodes":
				rep.Nodes = h.list()
			default:
				err = fmt.Errorf("unknown op %q", req.Op)
			}
			if err != nil {
				rep.Error = err.Error()
			}
		}
		rep.PID = os.Getpid()
		if err := enc.Encode(rep); err != nil {
			return
		}
	}
}

// start runs a node unless it runs already.
func (h *host) start(n *HostNode) error {
	if n == nil || n.NodeID == "" || n.WorkDir == "" {
		return errors.New("start: a node needs an id and a work dir")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return errHostClosing
	}
	if _, ok := h.nodes[n.NodeID]; ok {
		return nil
	}
	if err := os.MkdirAll(n.WorkDir, 0o700); err != nil {
		return fmt.Errorf("start %s: %w", n.NodeID, err)
	}
	lock, err := lockNode(n.WorkDir)
	if err != nil {
		return fmt.Errorf("start %s: %w", n.NodeID, err)
	}
	logf, err := os.OpenFile(n.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		lock.Close()
		return fmt.Errorf("start %s: %w", n.NodeID, err)
	}
	cfg := h.cfg.Base
	cfg.NodeID, cfg.WorkDir, cfg.ServerURL, cfg.JoinToken = n.NodeID, n.WorkDir, n.ServerURL, n.JoinToken
	cfg.Address, cfg.CAFile, cfg.TLSServerName = n.Address, n.CAFile, n.TLSServerName
	cfg.VCPUs, cfg.MemoryMB, cfg.GPUDevices, cfg.JobUser = n.VCPUs, n.MemoryMB, n.GPUDevices, n.JobUser
	opts := &slog.HandlerOptions{Level: h.cfg.Level}
	var lh slog.Handler = slog.NewTextHandler(logf, opts)
	if h.cfg.JSON {
		lh = slog.NewJSONHandler(logf, opts)
	}
	cfg.Log = slog.New(lh)
	if err := cfg.Validate(); err != nil {
		lock.Close()
		logf.Close()
		return fmt.Errorf("start %s: %w", n.NodeID, err)
	}
	ctx, cancel := context.WithCancel(h.ctx) // SIGTERM to the host stops every node
	hn := &hostedNode{cancel: cancel, done: make(chan struct{}), lock: lock, logf: logf}
	h.nodes[n.NodeID] = hn
	go func() {
		hn.err = Run(ctx, cfg)
		if hn.err != nil {
			cfg.Log.Error("node agent ended", "err", hn.err)
		}
		h.mu.Lock()
		delete(h.nodes, n.NodeID)
		left := len(h.nodes)
		h.mu.Unlock()
		hn.lock.Close() // the node is no longer run: its lock goes
		hn.logf.Close()
		close(hn.done)
		if hn.err != nil { // its own log goes with its folder; the host's stays
			h.cfg.Log.Warn("node stopped", "node", n.NodeID, "nodes", left, "err", hn.err)
		} else {
			h.cfg.Log.Info("node stopped", "node", n.NodeID, "nodes", left)
		}
		if left == 0 {
			select {
			case h.empty <- struct{}{}:
			default:
			}
		}
	}()
	h.cfg.Log.Info("node started", "node", n.NodeID)
	return nil
}

// stop stops a node as SIGTERM stops an agent (its job stopped within
// grace and reported) and waits for it, at most grace and the agent's
// stop timeout; a node the host does not run is stopped already.
func (h *host) stop(id string, grace time.Duration) error {
	h.mu.Lock()
	hn, ok := h.nodes[id]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	hn.cancel()
	limit := grace + h.cfg.Base.StopTimeout
	if limit <= 0 {
		limit = DefaultConfig().StopTimeout
	}
	select {
	case <-hn.done:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("node %s did not stop within %s", id, limit)
	}
}

func (h *host) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for id := range h.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// stopAll stops every node (the host is stopping) and waits for them.
func (h *host) stopAll() {
	h.mu.Lock()
	var all []*hostedNode
	for _, hn := range h.nodes {
		hn.cancel()
		all = append(all, hn)
	}
	h.mu.Unlock()
	for _, hn := range all {
		<-hn.done
	}
}

// lockNode takes a node's lock, beside its work dir, for as long as the
// host runs it (the file stays open; the kernel drops the lock when it is
// closed or the host dies).
func lockNode(workDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Clean(workDir)), hostLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("the node runs already (its lock is held): %w", err)
	}
	return f, nil
}

// HostedNodeRuns reports whether a host runs the node whose folder is dir
// (the parent of its work dir): whether the node's lock is held.
func HostedNodeRuns(dir string) bool {
	f, err := os.Open(filepath.Join(dir, hostLockName))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// HostClient talks to the host serving a folder.
type HostClient struct {
	Dir string
}

// Socket is the host's socket.
func (c HostClient) Socket() string { return filepath.Join(c.Dir, hostSocketName) }

// call sends one request and reads its reply; the host's pid comes back
// with every reply.
func (c HostClient) call(ctx context.Context, req hostRequest) (hostReply, error) {
	addr, release, err := socketAddr(c.Socket())
	if err != nil {
		return hostReply{}, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", addr)
	release()
	if err != nil {
		return hostReply{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return hostReply{}, err
	}
	var rep hostReply
	if err := json.NewDecoder(io.LimitReader(conn, 1<<20)).Decode(&rep); err != nil {
		return hostReply{}, fmt.Errorf("node host %s: %w", c.Dir, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("node host %s: %s", c.Dir, rep.Error)
	}
	return rep, nil
}

// Start has the host run a node (nothing when it runs it already) and
// returns the host's pid. ErrNoHost: no host serves the folder (none runs,
// or it is exiting); start one and try again.
func (c HostClient) Start(ctx context.Context, n HostNode) (int, error) {
	rep, err := c.call(ctx, hostRequest{Op: "start", Node: &n})
	if err != nil && (rep.Error == errHostClosing.Error() || isDialRefused(err)) {
		return 0, fmt.Errorf("%w: %v", ErrNoHost, err)
	}
	return rep.PID, err
}

// ErrNoHost says that no host serves a folder.
var ErrNoHost = errors.New("no node host serves the folder")

// isDialRefused reports an error of dialing a socket nobody serves.
func isDialRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// Stop stops a node (see host.stop).
func (c HostClient) Stop(ctx context.Context, id string, grace time.Duration) error {
	_, err := c.call(ctx, hostRequest{Op: "stop", ID: id, Grace: grace})
	return err
}

// Nodes lists the nodes the host runs and returns its pid.
func (c HostClient) Nodes(ctx context.Context) ([]string, int, error) {
	rep, err := c.call(ctx, hostRequest{Op: "nodes"})
	return rep.Nodes, rep.PID, err
}
