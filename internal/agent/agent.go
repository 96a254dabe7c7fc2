// Package agent is the node agent (`cumulus agent`): it registers a node
// with the control plane, long-polls for instructions, runs the job it is
// assigned as a process in its own working directory, ships the job's log
// and outputs, and reports how the job ended. The protocol is in
// internal/agentapi.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/gpu"
)

// ErrUnknownNode is returned by Run when the server has no record of this
// node, or refuses the node token it gave (401, which is how the server
// answers a poll of a node it does not know): the node was removed while
// its agent was away, and the agent must not carry on.
var ErrUnknownNode = errors.New("the server has no record of this node")

// Config is what an agent needs. Zero durations take the defaults of
// DefaultConfig.
type Config struct {
	ServerURL string // control plane, e.g. https://10.0.0.1:8787, or its replicas comma-separated
	JoinToken string // bootstrap token for the first registration
	NodeID    string // set when the provider created the node record first
	WorkDir   string // identity.json and jobs/<uid>/ live here
	CAFile    string // PEM CA to trust for ServerURL ("" for plain HTTP or system roots)
	// TLSServerName is the name the server's certificate is checked for,
	// when it is not ServerURL's host (a subnet's bridge address).
	TLSServerName string
	Address       string // IP other nodes reach this node at, or a CIDR to take it in ("" to detect)
	Hostname      string // "" for os.Hostname
	Version       string // agent version reported at registration

	// Resource limits for jobs (0: none). Enforced with cgroup v2 where
	// possible, else only recorded.
	VCPUs    int
	MemoryMB int

	Log        *slog.Logger // nil: discard
	Clock      clock.Clock  // nil: the wall clock
	HTTPClient *http.Client // nil: one built from CAFile
	// DetectGPUs lists the machine's GPUs; nil runs nvidia-smi (gpu.Detect).
	DetectGPUs func(context.Context) ([]agentapi.GPU, error)
	// GPUDevices are the devices of the machine this node offers, and so
	// the only ones its jobs are given: a comma-separated list (index,
	// ID such as "0:1" for a MIG instance, or UUID), "none", "all" (the
	// same as ""), or "env:NAME" for the list in variable NAME (Slurm's
	// CUDA_VISIBLE_DEVICES, a pod's NVIDIA_VISIBLE_DEVICES). Providers set
	// it to the devices the node was given; see gpus.go.
	GPUDevices string
	// UsageInterval is how often the node's utilization is sampled (0:
	// what the server says at registration, else DefaultUsageInterval).
	// UsageClock paces the sampling (nil: the wall clock); QueryGPUs returns
	// nvidia-smi's answer to usage.GPUQueryArgs (nil: run nvidia-smi on a
	// node with GPUs). See usage.go.
	UsageInterval time.Duration
	UsageClock    clock.Clock
	QueryGPUs     func(context.Context) ([]byte, error)

	LogInterval time.Duration // how often a running job's log is shipped
	// ReportRunningAfter is how long a job runs before the agent reports
	// it running (0: the default; negative: at once). A job that ends
	// sooner is reported once, its exit carrying its start (the server
	// records it Running, then ended): a request less for each short job.
	ReportRunningAfter time.Duration
	MinBackoff         time.Duration // first retry delay after a failed call
	MaxBackoff         time.Duration // retry delays double up to this
	DefaultGrace       time.Duration // SIGTERM → SIGKILL when an assignment has no grace
	// StopTimeout bounds how long a stopping agent keeps trying to deliver
	// its jobs' last logs, outputs and exit events.
	StopTimeout time.Duration
	// KeepJobDirs is how many finished, reported job directories are kept
	// on disk (for debugging), at least; older ones are removed, in
	// batches (at most twice as many are kept), not after every job.
	KeepJobDirs int
	// Docker is the container runtime's CLI for jobs that name an image
	// ("docker"; "" or "none": run every job as plain processes).
	Docker string
	// JobNetwork is the network of job containers (docker run --network):
	// "" is the host's; a node that is itself a container in a network of
	// its own has "container:<its name>", so that its jobs share it.
	JobNetwork string
	// PullTimeout bounds pulling a job's image that is not on the node.
	PullTimeout time.Duration
	// Image is the image this node itself runs in, when the provider made
	// the node from a job's image (kubernetes): jobs of that image run here
	// as plain processes, already inside it.
	Image string
	// JobUser is "uid[:gid]" to run jobs as, isolated from the agent and
	// the rest of the machine (see sandbox.go; the agent must be root),
	// or "" to run them as the agent's user. Default: $CUMULUS_JOB_USER,
	// which the local provider sets for each node when it runs as root.
	JobUser string
}

// DefaultConfig returns the defaults Run fills in for zero fields.
func DefaultConfig() Config {
	home, _ := os.UserHomeDir()
	return Config{
		WorkDir:     filepath.Join(home, ".cumulus", "agent"),
		Version:     "dev",
		LogInterval: 300 * time.Millisecond,
		// ReportRunningAfter: short beside what a person or a client
		// watching the job notices, long beside a job of `true`.
		ReportRunningAfter: 100 * time.Millisecond,
		MinBackoff:         200 * time.Millisecond,
		MaxBackoff:         10 * time.Second,
		DefaultGrace:       10 * time.Second,
		StopTimeout:        30 * time.Second,
		KeepJobDirs:        10,
		Docker:             "docker",
		PullTimeout:        60 * time.Second,
		JobUser:            os.Getenv("CUMULUS_JOB_USER"),
	}
}

// Validate reports the first thing wrong with c, as one line for a person.
func (c *Config) Validate() error {
	if c.ServerURL == "" {
		return errors.New("no server URL: pass --server or set CUMULUS_SERVER")
	}
	if c.WorkDir == "" {
		return errors.New("no work directory: pass --work-dir or set CUMULUS_WORK_DIR")
	}
	if c.NodeID != "" && !safeName(c.NodeID) {
		return fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", c.NodeID)
	}
	return nil
}

func (c *Config) setDefaults() {
	d := DefaultConfig()
	if c.WorkDir == "" {
		c.WorkDir = d.WorkDir
	}
	if c.Version == "" {
		c.Version = d.Version
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.DetectGPUs == nil {
		c.DetectGPUs = gpu.Detect
	}
	for _, p := range []struct {
		dst *time.Duration
		def time.Duration
	}{
		{&c.LogInterval, d.LogInterval}, {&c.MinBackoff, d.MinBackoff}, {&c.MaxBackoff, d.MaxBackoff},
		{&c.DefaultGrace, d.DefaultGrace}, {&c.StopTimeout, d.StopTimeout},
	} {
		if *p.dst <= 0 {
			*p.dst = p.def
		}
	}
	if c.ReportRunningAfter == 0 {
		c.ReportRunningAfter = d.ReportRunningAfter
	}
	if c.KeepJobDirs <= 0 {
		c.KeepJobDirs = d.KeepJobDirs
	}
}

// Run registers the node and serves the control plane's instructions until
// ctx ends (jobs are stopped gracefully, their logs flushed and exits
// reported; Run returns nil), the server says Shutdown (the same; nil), or
// the server says the node is unknown (ErrUnknownNode). It returns an
// error when registration is refused for good.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	c, err := newClient(cfg.ServerURL, cfg.CAFile, cfg.TLSServerName, cfg.HTTPClient)
	if err != nil {
		return err
	}
	a := &agent{
		cfg:    cfg,
		clk:    cfg.Clock,
		c:      c,
		nodeID: cfg.NodeID,
		jobs:   map[string]*job{},
		wake:   make(chan struct{}, 1),
	}
	c.log = a.logger
	a.setLogger()
	return a.run(ctx)
}

// agent is one running agent.
type agent struct {
	cfg  Config
	clk  clock.Clock
	c    *client
	gpus []agentapi.GPU // the devices this node offers
	// machineGPUs: the machine has devices, this node's or others'.
	machineGPUs bool
	// jobCred is the user jobs run as (Config.JobUser), nil for the
	// agent's own.
	jobCred *syscall.Credential

	// life outlives the caller's ctx by up to StopTimeout, so that a
	// stopping agent can still report how its jobs ended.
	life context.Context
	// stopping is the caller's ctx's end: the agent was told to stop.
	stopping <-chan struct{}
	wg       sync.WaitGroup // job runners

	limitsOnce sync.Once
	noCgroups  atomic.Bool // cgroups failed once: do not try again
	dockerOnce sync.Once
	docker     bool // a container engine answers
	// The containers prepared for the next jobs (prepared.go).
	prepMu      sync.Mutex
	prep        []*preparedContainer // under prepMu: the pool, oldest first, all of one image
	prepDepth   int                  // under prepMu: how many to keep prepared (0: 1)
	prepStopped bool                 // under prepMu: the agent stops, prepare no more
	prepWG      sync.WaitGroup       // preparing and removing containers
	// startContainer starts a prepared container: startPrepared, or a
	// test's double.
	startContainer func(pc *preparedContainer, image string) error
	launchOnce     sync.Once
	launchBin      string // the launcher's executable
	launchErr      error
	wake           chan struct{} // a job changed state: poll again soon
	sshOnce        sync.Once
	ssh            *sshServer // under mu
	msiOnce        sync.Once
	msiURL         string
	msiErr         error
	msiJobs        map[string]*job // managed-identity secret → running job (under mu)

	mu          sync.Mutex
	log         *slog.Logger
	nodeID      string
	pollTimeout time.Duration
	heartbeat   time.Duration
	jobs        map[string]*job // running, finishing, or not yet acknowledged
	current     *job            // the job this node is busy with
	acked       int             // jobs acknowledged since the job dirs were last pruned
	spaceOwner  string          // whose job last ran with the private /tmp and /dev/shm ("": none since start)
	usageEvery  time.Duration   // the sampling interval the server gave
	usage       *agentapi.Usage // the latest sample, sent with every poll
}

func (a *agent) setLogger() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.log = a.cfg.Log.With("component", "agent", "node", a.nodeID)
}

func (a *agent) logger() *slog.Logger {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log
}

func (a *agent) node() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeID
}

func (a *agent) run(ctx context.Context) error {
	if err := a.isolate(); err != nil {
		return err
	}
	if a.cfg.Address == "" || strings.Contains(a.cfg.Address, "/") {
		addr, err := detectAddress(a.cfg.Address)
		if err != nil {
			return err
		}
		a.cfg.Address = addr
	}
	if a.cfg.Hostname == "" {
		a.cfg.Hostname, _ = os.Hostname()
	}
	found, err := a.cfg.DetectGPUs(ctx)
	if err != nil {
		a.logger().Warn("GPU detection failed; reporting no GPUs", "err", err)
	}
	if a.gpus, err = offeredGPUs(a.cfg.GPUDevices, found, os.Getenv); err != nil {
		return err
	}
	a.machineGPUs = len(found) > 0
	if len(found) > len(a.gpus) {
		a.logger().Info("this node offers some of the machine's GPUs", "offered", strings.Join(gpu.IDs(a.gpus), ","), "found", len(found))
	}

	life, cancelLife := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLife()
	a.life, a.stopping = life, ctx.Done()
	defer a.stopPreparing() // after the jobs: none takes a prepared container then

	a.removeLeftoverPrepared(ctx)
	a.clearSpares()
	recovered := a.recoverJobs()
	if err := a.register(ctx); err != nil {
		a.stopAll(agentapi.ReasonNodeStopped)
		a.waitJobs(cancelLife)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	recovered()
	stopSampling := a.startSampling(ctx)
	err = a.loop(ctx)
	stopSampling()
	reason := agentapi.ReasonNodeStopped
	switch {
	case errors.Is(err, errShutdown):
		reason, err = "the node was shut down", nil
	case errors.Is(err, ErrUnknownNode):
		reason = "the server has no record of this node"
		a.logger().Error("the server has no record of this node: it was removed while this agent was away; exiting")
	case ctx.Err() != nil:
		a.noticeLeaving(life)
	}
	a.stopAll(reason)
	a.waitJobs(cancelLife)
	a.removeNodeCgroup()
	a.logger().Info("agent stopped", "reason", reason)
	return err
}

var errShutdown = errors.New("shutdown")

// loop long-polls the server and applies its instructions.
func (a *agent) loop(ctx context.Context) error {
	b := a.newBackoff()
	failing := false
	for {
		start := a.clk.Now()
		resp, err := a.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if isStatus(err, http.StatusUnauthorized) {
				// The server refuses the node token it gave this agent
				// (or the one a previous agent process saved). It answers
				// an unknown node and a wrong token alike, so that node
				// ids cannot be probed: either way this node is over (it
				// was removed, or registered again elsewhere), as when
				// the server says Unknown. Registering again would make
				// a machine joined by hand a new node behind the back of
				// whoever removed it.
				return fmt.Errorf("%w: the server refuses the node token: %w", ErrUnknownNode, err)
			}
			if !failing {
				a.logger().Warn("poll failed; retrying (running jobs carry on)", "err", err)
				failing = true
			} else {
				a.logger().Debug("poll failed", "err", err)
			}
			if sleep(ctx, a.clk, b.next()) != nil {
				return nil
			}
			continue
		}
		if failing {
			a.logger().Info("reconnected to the server")
			failing = false
		}
		b.reset()
		if resp.Unknown {
			return ErrUnknownNode
		}
		for _, uid := range resp.Cancel {
			a.cancelJob(uid, resp.StopReasons[uid])
		}
		for _, uid := range resp.Preempt {
			a.preemptJob(uid, resp.PreemptGrace, resp.StopReasons[uid])
		}
		accepted := true
		if resp.Assign != nil {
			accepted = a.assign(*resp.Assign)
		}
		if resp.Shutdown {
			a.logger().Info("the server asked this node to shut down")
			return errShutdown
		}
		if (resp.Assign == nil || !accepted) && len(resp.Cancel) == 0 && len(resp.Preempt) == 0 {
			a.idle(ctx, start)
		}
	}
}

// idle paces polls when the server does not hold them (PollTimeout 0 with
// a heartbeat interval): poll every heartbeat interval, or sooner when a
// job changes state. A server that long-polls (or whose timings are not
// known) is called again at once.
func (a *agent) idle(ctx context.Context, start time.Time) {
	a.mu.Lock()
	pt, hb := a.pollTimeout, a.heartbeat
	a.mu.Unlock()
	if pt > 0 || hb <= 0 {
		// The server holds polls; one that answers "carry on" at once,
		// again and again, must not make this loop spin.
		if a.clk.Now().Sub(start) < 5*time.Millisecond {
			_ = sleep(ctx, a.clk, a.cfg.MinBackoff)
		}
		return
	}
	wait := hb - a.clk.Now().Sub(start)
	if wait <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-a.wake:
	case <-a.clk.After(wait):
	}
}

func (a *agent) poll(ctx context.Context) (agentapi.PollResponse, error) {
	a.mu.Lock()
	pt := a.pollTimeout
	a.mu.Unlock()
	if pt <= 0 {
		pt = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, pt+15*time.Second)
	defer cancel()
	var resp agentapi.PollResponse
	err := a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/poll",
		json: agentapi.PollRequest{NodeID: a.node(), Jobs: a.jobStates(), Usage: a.latestUsage()}}, &resp)
	return resp, err
}

// jobList is a snapshot of the agent's jobs, to read without its lock.
func (a *agent) jobList() []*job {
	a.mu.Lock()
	defer a.mu.Unlock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	return jobs
}

// jobStates is this node's view of its jobs, for poll and register.
func (a *agent) jobStates() []agentapi.JobState {
	var out []agentapi.JobState
	for _, j := range a.jobList() {
		out = append(out, j.report())
	}
	return out
}

// assign starts a job unless the node is busy.
// assign starts an assignment; it returns false when the node is busy
// (the server assigns again at the next poll).
func (a *agent) assign(asg agentapi.Assignment) bool {
	log := a.logger()
	if !safeName(asg.UID) {
		log.Error("ignoring an assignment with an invalid job uid", "uid", asg.UID)
		return false
	}
	a.mu.Lock()
	if old, ok := a.jobs[asg.UID]; ok && old.asg.Attempt == asg.Attempt {
		a.mu.Unlock()
		return true // already running or reporting it
	}
	var prev *job
	if old, ok := a.jobs[asg.UID]; ok && old.asg.Attempt < asg.Attempt && a.current == nil {
		// An earlier attempt of the same job ended here and is still
		// reporting: keep it under its own key and take the new attempt,
		// which waits for it before it prepares the job's folder.
		a.jobs[asg.UID+"#"+strconv.Itoa(old.asg.Attempt)] = old
		delete(a.jobs, asg.UID)
		prev = old
	}
	if a.current != nil || a.jobs[asg.UID] != nil {
		busy := asg.UID
		if a.current != nil {
			busy = a.current.asg.UID
		}
		a.mu.Unlock()
		log.Warn("ignoring an assignment: the node is busy with another job", "job", asg.UID, "attempt", asg.Attempt, "busyWith", busy)
		return false
	}
	j := newJob(a, asg, log)
	j.prev = prev
	a.jobs[asg.UID] = j
	a.current = j
	a.mu.Unlock()
	log.Info("job assigned", "job", asg.UID, "name", asg.Name, "attempt", asg.Attempt)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		j.run()
	}()
	if asg.CostLimit > 0 {
		go j.stopAtCostLimit()
	}
	return true
}

// cancelJob stops a job the server no longer runs on this node, for the
// reason it gives ("canceled" when none).
func (a *agent) cancelJob(uid, reason string) {
	if reason == "" {
		reason = "canceled"
	}
	a.mu.Lock()
	j := a.jobs[uid]
	a.mu.Unlock()
	if j != nil {
		j.stop(reason)
	}
}

// preemptJob stops a job because its node is being preempted, or because
// its compute's queue policy stopped it for another job (reason, when the
// server gives one), with the preemption grace period between SIGTERM and
// SIGKILL.
func (a *agent) preemptJob(uid string, grace time.Duration, reason string) {
	a.mu.Lock()
	j := a.jobs[uid]
	a.mu.Unlock()
	if reason == "" {
		reason = "preempted: the node is being reclaimed"
	}
	if j != nil {
		j.setGrace(grace)
		j.stop(reason)
	}
}

// stopAll stops every job's process.
func (a *agent) stopAll(reason string) {
	a.mu.Lock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	for _, j := range jobs {
		j.stop(reason)
	}
}

// waitJobs waits for stopped jobs' processes to end (each within its grace
// period), then for the runners to finish reporting for at most
// StopTimeout; then it cancels what they still try and waits for them to
// return.
func (a *agent) waitJobs(cancelLife context.CancelFunc) {
	a.mu.Lock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	for _, j := range jobs {
		<-j.procDone
	}
	done := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-a.clk.After(a.cfg.StopTimeout):
		a.logger().Warn("gave up reporting some jobs to the server; they are reported at the next start of this agent", "after", a.cfg.StopTimeout)
	}
	cancelLife()
	<-done
}

// finished is called by a runner when its job's process ended and its
// logs and outputs were shipped: the node can take the next job.
func (a *agent) finished(j *job) {
	a.mu.Lock()
	if a.current == j {
		a.current = nil
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// acknowledged drops a job whose exit the server recorded.
func (a *agent) acknowledged(j *job) {
	a.mu.Lock()
	for k, x := range a.jobs {
		if x == j {
			delete(a.jobs, k)
		}
	}
	a.acked++
	prune := a.acked >= a.cfg.KeepJobDirs
	if prune {
		a.acked = 0
	}
	a.mu.Unlock()
	if prune { // every KeepJobDirs jobs: reading each kept job's state for every job was 5% of a node's CPU
		a.pruneJobDirs()
	}
}

// backoff yields exponentially growing delays.
type backoff struct {
	min, max, cur time.Duration
}

func (a *agent) newBackoff() *backoff {
	return &backoff{min: a.cfg.MinBackoff, max: a.cfg.MaxBackoff}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur *= 2
	}
	if b.cur > b.max {
		b.cur = b.max
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clk.After(d):
		return nil
	}
}

// retry calls f until it succeeds, fails for good (a 4xx answer), or ctx
// ends. The first failure is logged as a warning, later ones at debug.
func (a *agent) retry(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	b := a.newBackoff()
	for n := 1; ; n++ {
		err := f(ctx)
		if err == nil {
			if n > 1 {
				log.Info(what+" succeeded after retries", "attempts", n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (gave up: %w)", what, err, ctx.Err())
		}
		if permanent(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n == 1 {
			log.Warn(what+" failed; retrying", "err", err)
		} else {
			log.Debug(what+" failed", "err", err, "attempt", n)
		}
		if err := sleep(ctx, a.clk, b.next()); err != nil {
			return fmt.Errorf("%s: gave up: %w", what, err)
		}
	}
}

// safeName reports whether s can be a file name and URL path segment.
func safeName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// noticeLeaving tells the server this node is going away (SIGTERM from
// outside: a machine shut down, a container stopped), so that its job is
// requeued at once — as a preemption on a low-priority cluster — rather
// than failed with the signal's exit code.
func (a *agent) noticeLeaving(ctx context.Context) {
	a.mu.Lock()
	busy := a.current != nil
	a.mu.Unlock()
	if !busy {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/leaving",
		json: map[string]string{"reason": "the node agent received SIGTERM"}}, nil)
	if err != nil {
		a.logger().Warn("could not tell the server this node is leaving", "err", err)
	}
}
