// Package local is the provider whose nodes are agent processes on this
// machine: `cumulus agent` started detached (its own session), so a node
// and the job it runs outlive a control plane that is killed. It acts, it
// never decides.
package local

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/procstat"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Options configure the provider.
type Options struct {
	// BaseDir holds one folder per node: agent.pid, agent.log, job.uid
	// and the agent's work dir. It must lie outside the control plane's
	// data dir (the daemon's default is a sibling, <data-dir>-nodes).
	BaseDir string
	// AgentCommand starts an agent; the node's flags are appended. Default:
	// this executable and "agent".
	AgentCommand []string
	Log          *slog.Logger
	// StopGrace is how long Delete waits for an agent to stop its job and
	// exit after SIGTERM before it kills it. Default 10 s.
	StopGrace time.Duration
	// JobsAsServerUser turns job isolation off: jobs run as the server's
	// user and see what it sees. By default, when the server runs as root
	// and can make mount namespaces, each node's jobs run as a user of
	// their own in a mount namespace that hides the data dir, the other
	// node folders and the agent's files (see Isolation).
	JobsAsServerUser bool
	// ProcessPerNode gives each node an agent process of its own instead
	// of running a compute's nodes in one node host (see host.go): a crash
	// then costs one node, for the memory of a process per node.
	ProcessPerNode bool
	// ControlPlane, when set, serves the control plane on a subnet
	// bridge's address; with it (and root) the provider places nodes of a
	// subnet, or of a cluster without public IPs, in network namespaces
	// (see ProbeNetwork and netns.go).
	ControlPlane provider.ControlPlane
	// GPUs reads the machine's accelerators, which the nodes divide
	// (nil: nvidia-smi, gpu.NvidiaSMI).
	GPUs gpu.Inventory
	// JobUsersDir is the machine's folder where nodes folders claim their
	// blocks of job users (jobusers.go); "" is DefaultJobUsersDir.
	JobUsersDir string
}

// Provider runs nodes as local agent processes.
type Provider struct {
	o  Options
	mu sync.Mutex // serializes Create and Delete
	// userBlock is the block of job users this provider's nodes folder
	// holds, once claimed (jobUserBlock; under mu); ok tells it is.
	userBlock struct {
		n  int
		ok bool
	}
}

var (
	_ provider.Provider     = (*Provider)(nil)
	_ provider.Accelerators = (*Provider)(nil)
)

// Files in a node's folder.
const (
	pidFile  = "agent.pid"
	logFile  = "agent.log"
	uidFile  = "job.uid" // the user the node's jobs run as, when isolated
	workDir  = "work"
	idPrefix = "local:"
)

// New returns a local provider.
func New(o Options) *Provider {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	return &Provider{o: o}
}

// Name is "local".
func (p *Provider) Name() string { return "local" }

// Machine reads this machine's accelerators: the nodes divide them, each
// agent offering the devices of its NodeSpec.Devices only.
func (p *Provider) Machine(ctx context.Context) (gpu.Machine, error) {
	inv := p.o.GPUs
	if inv == nil {
		inv = gpu.NvidiaSMI{}
	}
	ds, err := inv.Devices(ctx)
	if err != nil {
		return gpu.Machine{}, fmt.Errorf("local provider: %w", err)
	}
	return gpu.Machine{Devices: ds}, nil
}

func (p *Provider) nodeDir(nodeID string) (string, error) {
	if !provider.ValidNodeID(nodeID) {
		return "", fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", nodeID)
	}
	if p.o.BaseDir == "" {
		return "", errors.New("local provider: no base directory")
	}
	return filepath.Join(p.o.BaseDir, nodeID), nil
}

// Create starts the node's agent unless it runs already, and returns
// "local:<pid>".
func (p *Provider) Create(ctx context.Context, spec provider.NodeSpec) (string, error) {
	dir, err := p.nodeDir(spec.NodeID)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid, ok := p.running(spec.NodeID); ok {
		return idPrefix + strconv.Itoa(pid), nil
	}
	argv := p.o.AgentCommand
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return "", provider.Configurationf("local provider: find the cumulus executable: %w", err)
		}
		argv = []string{exe, "agent"}
	}
	if err := os.MkdirAll(filepath.Join(dir, workDir), 0o700); err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	address, cp := "127.0.0.1", provider.Endpoint{URL: spec.ServerURL}
	if spec.Subnet != "" || spec.NoPublicIP {
		prefix, addr, u, err := p.setupNetwork(spec.NodeID, dir, spec.Subnet, spec.ComputeID, !spec.NoPublicIP)
		if err != nil {
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
		argv = append(prefix, argv...)
		address, cp = addr, u
	}
	jobUser := ""
	if isolated, _ := p.Isolation(); isolated {
		uid, err := p.jobUID(spec.NodeID)
		if err != nil {
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
		jobUser = fmt.Sprintf("%d:%d", uid, uid)
	}
	if spec.Subnet == "" && !spec.NoPublicIP && !p.o.ProcessPerNode {
		return p.createHosted(ctx, spec, dir, argv, jobUser)
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	args := append(argv[1:len(argv):len(argv)],
		"--server", cp.URL,
		"--node-id", spec.NodeID,
		"--work-dir", filepath.Join(dir, workDir),
		"--address", address)
	if spec.CAFile != "" {
		args = append(args, "--ca-file", spec.CAFile)
	}
	if cp.TLSServerName != "" {
		args = append(args, "--tls-server-name", cp.TLSServerName)
	}
	cmd := exec.Command(argv[0], args...)
	cmd.Dir = dir
	// The join token goes in the environment, not the command line that
	// any user can read in /proc. The agent gets a minimal environment,
	// not the server's (which may hold cloud credentials).
	cmd.Env = append(agentEnv(),
		"CUMULUS_JOIN_TOKEN="+spec.JoinToken,
		"CUMULUS_VCPUS="+strconv.Itoa(spec.VCPUs),
		"CUMULUS_MEMORY_MB="+strconv.Itoa(int(spec.MemoryGB*1024)),
		"CUMULUS_GPUS="+strconv.Itoa(spec.GPUs),
		provider.GPUDevicesEnv+"="+provider.GPUDevicesValue(spec.Devices),
	)
	if jobUser != "" {
		cmd.Env = append(cmd.Env, "CUMULUS_JOB_USER="+jobUser)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survive the control plane
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", fmt.Errorf("create node %s: start agent: %w", spec.NodeID, err)
	}
	logf.Close() // the child has its own copy
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it while this process lives
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	p.o.Log.Info("node agent started", "node", spec.NodeID, "pid", pid, "log", filepath.Join(dir, logFile))
	return idPrefix + strconv.Itoa(pid), nil
}

// List reports every node folder; a node is Running while its agent
// process lives.
func (p *Provider) List(ctx context.Context) ([]provider.Instance, error) {
	ents, err := os.ReadDir(p.o.BaseDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list local nodes: %w", err)
	}
	var out []provider.Instance
	for _, e := range ents {
		if !e.IsDir() || !provider.ValidNodeID(e.Name()) || e.Name() == hostsDir {
			continue
		}
		in := provider.Instance{NodeID: e.Name()}
		if _, ok := p.hostOf(e.Name()); ok {
			pid, running := p.running(e.Name())
			in.Running = running
			if running {
				in.ProviderID = idPrefix + strconv.Itoa(pid)
			}
		} else if pid, ok := readPID(filepath.Join(p.o.BaseDir, e.Name(), pidFile)); ok {
			in.ProviderID = idPrefix + strconv.Itoa(pid)
			in.Running = isAgent(pid, e.Name())
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].NodeID < out[k].NodeID })
	return out, nil
}

// Delete stops the node's agent (SIGTERM; SIGKILL after StopGrace), kills
// any job it left behind and removes the node's folder. A node that is gone
// is not an error.
func (p *Provider) Delete(ctx context.Context, nodeID string) error {
	dir, err := p.nodeDir(nodeID)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if host, ok := p.hostOf(nodeID); ok {
		if agent.HostedNodeRuns(dir) {
			if err := (agent.HostClient{Dir: host}).Stop(ctx, nodeID, p.o.StopGrace); err != nil {
				p.o.Log.Warn("the node host did not stop the node; ending its jobs", "node", nodeID, "err", err)
			}
		}
	} else if pid, ok := p.running(nodeID); ok {
		if err := p.stop(ctx, nodeID, pid); err != nil {
			return err
		}
	}
	if n := agent.KillJobs(filepath.Join(dir, workDir)); n > 0 {
		p.o.Log.Warn("killed jobs the node's agent left running", "node", nodeID, "groups", n)
	}
	agent.RemoveNodeCgroup(nodeID)
	p.teardownNetwork(nodeID, dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete node %s: %w", nodeID, err)
	}
	p.o.Log.Info("node removed", "node", nodeID)
	return nil
}

// stop signals the agent's process group (it leads its own session) and
// waits for it to exit.
func (p *Provider) stop(ctx context.Context, nodeID string, pid int) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(p.o.StopGrace)
	for isAgent(pid, nodeID) {
		if time.Now().After(deadline) {
			p.o.Log.Warn("node agent did not stop in time; killing it", "node", nodeID, "pid", pid, "grace", p.o.StopGrace)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return waitGone(ctx, pid, nodeID, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete node %s: %w", nodeID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // anything left in its group
	return nil
}

func waitGone(ctx context.Context, pid int, nodeID string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for isAgent(pid, nodeID) {
		if time.Now().After(deadline) {
			return fmt.Errorf("delete node %s: agent pid %d survived SIGKILL", nodeID, pid)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete node %s: %w", nodeID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// running returns the pid of the node's agent (or of the host that runs
// it) if it lives.
func (p *Provider) running(nodeID string) (int, bool) {
	if host, ok := p.hostOf(nodeID); ok {
		if !agent.HostedNodeRuns(filepath.Join(p.o.BaseDir, nodeID)) {
			return 0, false
		}
		pid, _ := readPID(filepath.Join(host, hostPIDFile))
		return pid, true
	}
	pid, ok := readPID(filepath.Join(p.o.BaseDir, nodeID, pidFile))
	if !ok || !isAgent(pid, nodeID) {
		return 0, false
	}
	return pid, true
}

func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 1
}

// isAgent reports whether pid is alive and is the agent of nodeID.
func isAgent(pid int, nodeID string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	var st procstat.Stat
	if len(cmdline) == 0 {
		var ok bool
		if st, ok = procstat.Read(pid); !ok {
			return false
		}
	}
	return looksLikeAgent(pid, cmdline, st, nodeID)
}

// looksLikeAgent decides whether process pid, with this command line (and,
// when that is empty, this stat), is the agent of nodeID. Its command line
// names the node (a reused pid does not). With none, it is a zombie, a
// kernel thread, or a program caught inside its exec: the kernel has put
// the new program's memory in place but not yet its arguments, and
// exec.Cmd.Start returns at that point, so on a busy machine an agent just
// started looks so. That one is live and leads its own session, as every
// agent does.
func looksLikeAgent(pid int, cmdline []byte, st procstat.Stat, nodeID string) bool {
	if len(cmdline) == 0 {
		return st.Live() && !st.KernelThread() && st.Session == pid
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == nodeID || strings.HasSuffix(string(arg), "/"+nodeID+"/"+workDir) {
			return true
		}
	}
	return false
}

// agentEnvKeys are the variables of the server's environment an agent
// gets: what it needs to run (paths, locale, proxies and TLS roots to reach
// the server, the container runtime's client, its log level), no more.
var agentEnvKeys = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_CONTEXT",
	"CUMULUS_LOG_LEVEL", "GOCOVERDIR",
}

// agentEnv is an agent's environment before its node's own variables.
func agentEnv() []string {
	var env []string
	for _, k := range agentEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Isolation reports whether this provider isolates jobs: when the server
// runs as root and can make mount namespaces, each node's jobs run as a
// user of their own (see jobUID) in a mount namespace that hides the data
// dir, the other node folders and the agent's files. Otherwise why says
// what a job can reach, in one line.
func (p *Provider) Isolation() (isolated bool, why string) {
	const risk = "so jobs on local nodes run as the server's user: a job can read whatever that user can, " +
		"including the data dir (admin token, secret key, database), other nodes' folders and agent identities; " +
		"run cumulus serve as root where it can make mount namespaces, or use --provider docker or kubernetes"
	if p.o.JobsAsServerUser {
		return false, "job isolation is turned off (--isolate-jobs=false), " + risk
	}
	isolation.Do(func() {
		if os.Geteuid() != 0 {
			isolation.why = "the server does not run as root, " + risk
			return
		}
		if err := agent.CheckIsolation(jobUIDBase); err != nil {
			isolation.why = "jobs cannot be isolated here (" + err.Error() + "), " + risk
			return
		}
		isolation.ok = true
	})
	return isolation.ok, isolation.why
}

var isolation struct {
	sync.Once
	ok  bool
	why string
}

// Job users: node n of this provider runs its jobs as uid (and gid)
// jobUIDBase + block*jobUIDBlock + n, where block comes from a hash of the
// nodes folder and is claimed machine-wide (jobusers.go), so that two
// servers on one machine never share users.
// Numbers this high belong to no account on an ordinary machine.
const (
	jobUIDBase   = 2_000_000_000
	jobUIDBlock  = 10_000
	jobUIDBlocks = 10_000
)

// hashBlock is the block of job users of the nodes folder abs (an absolute
// path) unless another folder holds it.
func hashBlock(abs string) int {
	h := fnv.New32a()
	h.Write([]byte(abs))
	return int(h.Sum32() % jobUIDBlocks)
}

// jobUserBlock returns the block of job users of the nodes folder abs,
// claimed machine-wide at its first call (jobusers.go); when it cannot be
// claimed, its hash's, and the next call tries again. The caller holds
// p.mu.
func (p *Provider) jobUserBlock(abs string) int {
	if p.userBlock.ok {
		return p.userBlock.n
	}
	block, err := claimBlock(cmp.Or(p.o.JobUsersDir, DefaultJobUsersDir), abs, hashBlock(abs))
	if err != nil {
		p.o.Log.Warn("the node's job users are not claimed on this machine: another server here could get the same", "err", err)
		return hashBlock(abs)
	}
	p.userBlock.n, p.userBlock.ok = block, true
	return block
}

// jobUID returns the user of a node's jobs: the one it was given (job.uid
// in its folder), else the lowest one no other node folder holds. The
// caller holds p.mu. With it the node folder becomes passable (not
// listable) for others, so that the job user reaches its own job folder.
func (p *Provider) jobUID(nodeID string) (int, error) {
	dir := filepath.Join(p.o.BaseDir, nodeID)
	for _, d := range []string{p.o.BaseDir, dir, filepath.Join(dir, workDir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			return 0, fmt.Errorf("node folder: %w", err)
		}
	}
	if uid, ok := readPID(filepath.Join(dir, uidFile)); ok {
		return uid, nil
	}
	abs, err := filepath.Abs(p.o.BaseDir)
	if err != nil {
		return 0, fmt.Errorf("job user: %w", err)
	}
	first := jobUIDBase + p.jobUserBlock(abs)*jobUIDBlock
	used := map[int]bool{}
	files, _ := filepath.Glob(filepath.Join(p.o.BaseDir, "*", uidFile))
	for _, f := range files {
		if uid, ok := readPID(f); ok {
			used[uid] = true
		}
	}
	for uid := first; uid < first+jobUIDBlock; uid++ {
		if !used[uid] {
			if err := os.WriteFile(filepath.Join(dir, uidFile), []byte(strconv.Itoa(uid)+"\n"), 0o600); err != nil {
				return 0, fmt.Errorf("job user: %w", err)
			}
			return uid, nil
		}
	}
	return 0, provider.InsufficientCapacityf("job user: all %d users of %s are taken", jobUIDBlock, p.o.BaseDir)
}
