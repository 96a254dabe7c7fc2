// Package slurm is the provider whose nodes are Slurm jobs on an existing
// Slurm cluster: each node is one batch job, submitted with sbatch from the
// machine the control plane runs on (a login node), sized from the VM size
// (--cpus-per-task, --mem, --gres=gpu:N), named after the node, running
// `cumulus agent` with what Slurm allocated. Slurm decides where and when
// the jobs run; the provider reads its queue (squeue) to list nodes and to
// report what Slurm does to them (pending reasons, ends from outside) as
// provider events. It acts, it never decides.
package slurm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Defaults of Options.
const (
	DefaultWorkDir      = "/tmp/cumulus-slurm"
	DefaultLogDir       = "/tmp"
	DefaultPollInterval = 2 * time.Second
	defaultStopTimeout  = 2 * time.Minute
	callTimeout         = 30 * time.Second
)

// Options configure the provider.
type Options struct {
	// Partition, QOS and Account are where node jobs go unless their
	// compute says otherwise ("": Slurm's defaults). Low-priority computes'
	// node jobs go to LowPriorityPartition and LowPriorityQOS when set: a
	// partition or QOS that Slurm preempts.
	Partition, QOS, Account              string
	LowPriorityPartition, LowPriorityQOS string
	// SbatchArgs are more sbatch flags for every node job (a time limit,
	// constraints, a reservation).
	SbatchArgs []string
	// AgentBinary is the cumulus executable at a path every compute node
	// can run (a shared filesystem); default: this executable's path.
	AgentBinary string
	// WorkDir is where, on the compute nodes, each node's agent keeps its
	// work dir (<WorkDir>/<node id>, removed when the agent exits); LogDir
	// where Slurm writes each node job's output (<LogDir>/<node id>-<job
	// id>.log). Both must be absolute; LogDir must exist on the compute
	// nodes.
	WorkDir string
	LogDir  string
	// NodeAddress is the agents' --address: an IP range (CIDR) in which
	// each takes its machine's address, e.g. the cluster network's; ""
	// is the machine's first non-loopback IPv4.
	NodeAddress string
	// PollInterval is how often the queue is read for events.
	PollInterval time.Duration
	// Owner tells this control plane's node jobs from others' (its data
	// dir): the jobs carry a hash of it in their comment.
	Owner string
	Clock clock.Clock
	Log   *slog.Logger
	// StopTimeout bounds how long Delete waits for a node job that Slurm
	// was already ending from outside (to tell its end).
	StopTimeout time.Duration
}

// Provider runs nodes as Slurm jobs.
type Provider struct {
	o   Options
	tag string // the comment of this control plane's node jobs
	// killWait is how long Slurm waits between SIGTERM and SIGKILL when it
	// ends a job (0: unknown).
	killWait time.Duration

	mu sync.Mutex // serializes Create and Delete

	tmu  sync.Mutex // the tracker and the watch's callback
	seen *tracker
	tell func(provider.Event) // set while Watch runs
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Watcher  = (*Provider)(nil)
	_ provider.Checker  = (*Provider)(nil)
)

// New checks the options and that Slurm answers (squeue, and sbatch
// --test-only of a one-CPU job in the default and low-priority placements,
// with SbatchArgs), and returns the provider.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.AgentBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("slurm provider: find the cumulus executable: %w", err)
		}
		o.AgentBinary = exe
	}
	if o.WorkDir == "" {
		o.WorkDir = DefaultWorkDir
	}
	if o.LogDir == "" {
		o.LogDir = DefaultLogDir
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = defaultStopTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []struct{ flag, dir string }{{"agent binary", o.AgentBinary}, {"work dir", o.WorkDir}, {"log dir", o.LogDir}} {
		if !path.IsAbs(d.dir) {
			return nil, fmt.Errorf("slurm provider: the %s %q must be an absolute path (the same on every compute node)", d.flag, d.dir)
		}
	}
	for _, name := range []string{"sbatch", "squeue", "scancel"} {
		if _, err := exec.LookPath(name); err != nil {
			return nil, fmt.Errorf("slurm provider: %s is not on the PATH: run cumulus serve on a machine that submits Slurm jobs (a login node): %w", name, err)
		}
	}
	h := sha256.Sum256([]byte(o.Owner))
	p := &Provider{o: o, tag: "cumulus-node owner=" + hex.EncodeToString(h[:4]), seen: newTracker()}
	if _, err := p.queue(ctx); err != nil {
		return nil, fmt.Errorf("slurm provider: read the queue: %w", err)
	}
	p.killWait = p.readKillWait(ctx)
	for _, low := range []bool{false, true} {
		if err := p.CheckNode(ctx, provider.NodeSpec{VCPUs: 1, LowPriority: low}); err != nil {
			return nil, fmt.Errorf("slurm provider: sbatch refuses a one-CPU node job (%s): %w", p.placementWords(low), err)
		}
	}
	if _, err := os.Stat(o.AgentBinary); err != nil {
		o.Log.Warn("the agent binary is not on this machine; compute nodes must have it at this path", "agent_binary", o.AgentBinary, "err", err)
	}
	return p, nil
}

// placementWords names the default placement of a tier, for errors.
func (p *Provider) placementWords(low bool) string {
	partition, qos, account := p.o.placement(provider.NodeSpec{LowPriority: low})
	tier := "dedicated"
	if low {
		tier = "low priority"
	}
	s := tier + ": partition " + or(partition, "(Slurm's default)")
	if qos != "" {
		s += ", QOS " + qos
	}
	if account != "" {
		s += ", account " + account
	}
	return s
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Name is "slurm".
func (p *Provider) Name() string { return "slurm" }

// idPrefix begins provider ids: "slurm:<job id>".
const idPrefix = "slurm:"

// Create submits the node's job unless one of its jobs is pending or
// running, and returns "slurm:<job id>".
func (p *Provider) Create(ctx context.Context, spec provider.NodeSpec) (string, error) {
	if !provider.ValidNodeID(spec.NodeID) {
		return "", fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", spec.NodeID)
	}
	env, err := p.jobEnv(spec)
	if err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	jobs, err := p.queue(ctx)
	if err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	if j, ok := newest(jobs)[spec.NodeID]; ok && j.live() {
		return idPrefix + j.ID, nil // submitted before: Create is idempotent
	}
	out, err := p.run(ctx, p.o.script(spec), env, "sbatch", p.o.submitArgs(spec, p.tag)...)
	if err != nil {
		return "", p.refusal(ctx, spec, fmt.Errorf("create node %s: %w", spec.NodeID, err))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // --parsable: "id" or "id;cluster"
	if id == "" {
		return "", fmt.Errorf("create node %s: sbatch printed no job id", spec.NodeID)
	}
	partition, _, _ := p.o.placement(spec)
	p.o.Log.Info("node job submitted", "node", spec.NodeID, "slurm_job", id, "partition", or(partition, "(default)"),
		"log", path.Join(p.o.LogDir, spec.NodeID+"-"+id+".log"))
	return idPrefix + id, nil
}

// refusal says what kind of failure a refused sbatch is, by asking Slurm
// rather than reading its words: when Slurm answers and would never run
// such a job (sbatch --test-only refuses it too: a partition, QOS or
// account it does not know, a size no machine holds) it is a
// ConfigurationError; when it would, the refusal is of now (a limit on
// submitted jobs reached): an InsufficientCapacityError; when Slurm does
// not answer, err as it is (transient).
func (p *Provider) refusal(ctx context.Context, spec provider.NodeSpec, err error) error {
	switch check := p.CheckNode(ctx, spec); {
	case errors.Is(check, provider.ErrNeverFits):
		return provider.NewConfigurationError(err)
	case check == nil:
		return provider.NewInsufficientCapacityError(err)
	}
	return err
}

// Delete cancels the node's jobs (the agent gets SIGTERM, and Slurm's
// KillWait before SIGKILL) and returns once none of them counts in List.
// The end of a job it cancels is not told to the watch; a job Slurm ended,
// or was ending, from outside is waited for (up to StopTimeout) and its
// end, in Slurm's words, told before the node's record goes. Deleting a
// node that has no job is not an error.
func (p *Provider) Delete(ctx context.Context, nodeID string) error {
	if !provider.ValidNodeID(nodeID) {
		return fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", nodeID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	jobs, err := p.queue(ctx)
	if err != nil {
		return fmt.Errorf("delete node %s: %w", nodeID, err)
	}
	var cancel []string
	outside := false // a job Slurm ended, or is ending, without this provider
	for _, j := range jobs {
		if j.Node != nodeID {
			continue
		}
		switch phaseOf(j.State) {
		case phaseStarting, phaseRunning, phaseSuspended:
			cancel = append(cancel, j.ID)
		default:
			outside = true
		}
	}
	if len(cancel) > 0 {
		p.tmu.Lock()
		for _, id := range cancel {
			p.seen.cancelled(id)
		}
		p.tmu.Unlock()
		if _, err := p.run(ctx, "", commandEnv(), "scancel", cancel...); err != nil {
			// A job that ended meanwhile makes scancel fail; what counts
			// is that none is left.
			if jobs, qerr := p.queue(ctx); qerr != nil || hasLive(jobs, nodeID) {
				return fmt.Errorf("delete node %s: %w", nodeID, err)
			}
		}
		p.o.Log.Info("node job cancelled", "node", nodeID, "slurm_jobs", strings.Join(cancel, ","))
	}
	if outside {
		p.waitEnded(ctx, nodeID)
	}
	return nil
}

// waitEnded waits until no job of the node is still being ended, then
// tells the watch what that read of the queue means, so that how it ended
// is told.
func (p *Provider) waitEnded(ctx context.Context, nodeID string) {
	ctx, cancel := context.WithTimeout(ctx, p.o.StopTimeout)
	defer cancel()
	for {
		jobs, err := p.queue(ctx)
		if err == nil && !hasPhase(jobs, nodeID, phaseEnding) {
			p.observe(jobs)
			return
		}
		select {
		case <-ctx.Done():
			p.o.Log.Warn("Slurm is still ending the node's job", "node", nodeID, "waited", p.o.StopTimeout)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func hasLive(jobs []slurmJob, node string) bool {
	for _, j := range jobs {
		if j.Node == node && j.live() {
			return true
		}
	}
	return false
}

func hasPhase(jobs []slurmJob, node string, ph phase) bool {
	for _, j := range jobs {
		if j.Node == node && phaseOf(j.State) == ph {
			return true
		}
	}
	return false
}

// List reports the nodes whose newest job is pending (Starting) or running
// (Running); jobs Slurm is ending or has ended are left out.
func (p *Provider) List(ctx context.Context) ([]provider.Instance, error) {
	jobs, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	var out []provider.Instance
	for node, j := range newest(jobs) {
		if !j.live() {
			continue
		}
		ph := phaseOf(j.State)
		out = append(out, provider.Instance{NodeID: node, ProviderID: idPrefix + j.ID,
			Running: ph == phaseRunning, Starting: ph == phaseStarting})
	}
	return out, nil
}

// Watch reads the queue every PollInterval and reports what changed for
// each node (see tracker.events) until ctx ends.
func (p *Provider) Watch(ctx context.Context, fn func(provider.Event)) error {
	p.tmu.Lock()
	p.tell = fn
	p.tmu.Unlock()
	defer func() {
		p.tmu.Lock()
		p.tell = nil
		p.tmu.Unlock()
	}()
	failing := false
	for {
		jobs, err := p.queue(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				p.o.Log.Warn("cannot read Slurm's queue; node events wait until it answers", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				p.o.Log.Info("Slurm's queue answers again")
			}
			failing = false
			p.observe(jobs)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.o.Clock.After(p.o.PollInterval):
		}
	}
}

// observe tells the watch the events a read of the queue means.
func (p *Provider) observe(jobs []slurmJob) {
	p.tmu.Lock()
	defer p.tmu.Unlock()
	if p.tell == nil {
		return // told by the watch's own reads when it starts
	}
	for _, ev := range p.seen.events(jobs) {
		p.tell(ev)
	}
}

// CheckNode asks Slurm (sbatch --test-only) whether a node job of the spec
// could ever run: a partition that does not exist, or a size larger than
// every machine of the partition, is refused with Slurm's words (a
// *provider.Refusal about the vmSize, or the compute's Slurm placement
// when it has one). A low-priority node whose agent needs longer after
// SIGTERM (spec.GracePeriod) than Slurm gives a preempted job before
// SIGKILL (KillWait) is refused too: its job could not stop and save its
// checkpoint.
func (p *Provider) CheckNode(ctx context.Context, spec provider.NodeSpec) error {
	if _, err := p.queue(ctx); err != nil {
		return fmt.Errorf("cannot ask Slurm: %w", err)
	}
	if spec.LowPriority && p.killWait > 0 && spec.GracePeriod > p.killWait {
		return &provider.Refusal{Setting: "preemptionGracePeriod", Reason: fmt.Sprintf(
			"a preempted node's agent needs %s after SIGTERM (the preemption grace period and time to report), and Slurm kills the node job %s after it (KillWait): lower preemptionGracePeriod, or have Slurm's administrator raise KillWait",
			spec.GracePeriod, p.killWait)}
	}
	args := append([]string{"--test-only", "--job-name=cumulus-check"}, p.o.resourceArgs(spec)...)
	if _, err := p.run(ctx, "#!/bin/sh\ntrue\n", commandEnv(), "sbatch", args...); err != nil {
		setting := "vmSize"
		if spec.Slurm != nil {
			setting = "slurm"
		}
		return &provider.Refusal{Setting: setting, Reason: "sbatch --test-only says: " + slurmWords(err)}
	}
	return nil
}

var killWaitRe = regexp.MustCompile(`(?m)^KillWait\s*=\s*(\d+) sec`)

// readKillWait is Slurm's KillWait (scontrol show config), 0 when it
// cannot be read.
func (p *Provider) readKillWait(ctx context.Context) time.Duration {
	out, err := p.run(ctx, "", commandEnv(), "scontrol", "show", "config")
	if err != nil {
		p.o.Log.Warn("cannot read Slurm's KillWait; preemption grace periods are not checked against it", "err", err)
		return 0
	}
	m := killWaitRe.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Second
}

// queue reads this control plane's node jobs, including those ended
// recently (Slurm keeps them listed for MinJobAge).
func (p *Provider) queue(ctx context.Context) ([]slurmJob, error) {
	out, err := p.run(ctx, "", commandEnv(), "squeue", "--me", "--noheader", "--states=all", "--format="+queueFormat)
	if err != nil {
		return nil, err
	}
	return parseQueue(out, p.tag), nil
}

// cmdError is a Slurm command that failed, with what it said.
type cmdError struct {
	name   string
	stderr string
	err    error
}

func (e *cmdError) Error() string {
	if e.stderr == "" {
		return e.name + ": " + e.err.Error()
	}
	return e.name + ": " + e.stderr + " (" + e.err.Error() + ")"
}

func (e *cmdError) Unwrap() error { return e.err }

// slurmWords is what a failed Slurm command said, else the error.
func slurmWords(err error) string {
	var ce *cmdError
	if errors.As(err, &ce) && ce.stderr != "" {
		return ce.stderr
	}
	return err.Error()
}

// run runs a Slurm command with stdin and env, and returns its output.
func (p *Provider) run(ctx context.Context, stdin string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var lines []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return stdout.String(), &cmdError{name: name, stderr: strings.Join(lines, "; "), err: err}
	}
	return stdout.String(), nil
}

// commandKeys are the variables of the server's environment the Slurm
// commands get: where Slurm's configuration is, and who runs them.
var commandKeys = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "SLURM_CONF"}

// jobKeys are the further variables a node job gets from the server's
// environment (sbatch exports its own environment to the job).
var jobKeys = []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"CUMULUS_LOG_LEVEL", "GOCOVERDIR"}

func envOf(keys []string) []string {
	var env []string
	for _, k := range keys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// commandEnv is the environment of squeue, scancel and a checking sbatch:
// the server's own is left out, so that its SQUEUE_*, SBATCH_* or SCANCEL_*
// settings (a format, an interactive scancel) cannot change what the
// provider reads or does.
func commandEnv() []string { return envOf(commandKeys) }

// jobEnv is the environment of a node's sbatch, and so of its job: the
// command environment, the variables above, the node's join token (never
// on a command line or in the script) and the control plane's CA.
func (p *Provider) jobEnv(spec provider.NodeSpec) ([]string, error) {
	env := append(commandEnv(), envOf(jobKeys)...)
	env = append(env, "CUMULUS_JOIN_TOKEN="+spec.JoinToken)
	if spec.CAFile != "" {
		pem, err := os.ReadFile(spec.CAFile)
		if err != nil {
			return nil, fmt.Errorf("the control plane's CA for the agent: %w", err)
		}
		env = append(env, "CUMULUS_CA_PEM="+string(pem))
	}
	return env, nil
}
