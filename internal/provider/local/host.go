package local

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// A compute's local nodes share one agent process, a node host (see
// agent.Host): each node is an agent of its own inside it (its identity,
// work dir, job user, cgroup, devices, log), and the process is paid once
// per compute rather than once per node. A node in a network namespace
// (a subnet, no public IP) keeps an agent process of its own, started in
// its namespace.
//
// A node's folder names its host (agent.host, the host's folder) instead
// of an agent pid; the node runs while its lock is held (agent.lock,
// beside its work dir), which is how List and Watch see it. The host is
// started, detached, by the first Create of a node of its compute, and
// exits when its last node stops. Killing the host kills every node of
// the compute on this machine at once: each is reported gone, and its job
// requeued, as when a node's own agent dies.

// Files of the provider's folder and of hosted nodes' folders.
const (
	hostsDir    = ".hosts"     // in BaseDir: one folder per compute's host
	hostFile    = "agent.host" // in a hosted node's folder: its host's folder
	hostPIDFile = "host.pid"   // in a host's folder
	hostLogFile = "host.log"
)

// hostDirOf is the folder of the host of a compute's nodes.
func (p *Provider) hostDirOf(computeID string) string {
	h := fnv.New64a()
	h.Write([]byte(computeID))
	return filepath.Join(p.o.BaseDir, hostsDir, strconv.FormatUint(h.Sum64(), 16))
}

// hostOf is the folder of the host that runs a node, when a host does.
func (p *Provider) hostOf(nodeID string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(p.o.BaseDir, nodeID, hostFile))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// createHosted has the host of the node's compute run it, starting the
// host when none runs. The caller holds p.mu and made the node's folder.
func (p *Provider) createHosted(ctx context.Context, spec provider.NodeSpec, dir string, argv []string, jobUser string) (string, error) {
	host := p.hostDirOf(spec.ComputeID)
	if err := os.WriteFile(filepath.Join(dir, hostFile), []byte(host+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	n := agent.HostNode{
		NodeID: spec.NodeID, WorkDir: filepath.Join(dir, workDir), ServerURL: spec.ServerURL, JoinToken: spec.JoinToken,
		Address: "127.0.0.1", CAFile: spec.CAFile, VCPUs: spec.VCPUs, MemoryMB: int(spec.MemoryGB * 1024),
		GPUDevices: provider.GPUDevicesValue(spec.Devices), JobUser: jobUser, LogFile: filepath.Join(dir, logFile),
	}
	c := agent.HostClient{Dir: host}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pid, err := c.Start(cctx, n)
	if errors.Is(err, agent.ErrNoHost) {
		if err = p.startHost(cctx, host, argv); err == nil {
			pid, err = c.Start(cctx, n)
		}
	}
	if err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	p.o.Log.Info("node agent started", "node", spec.NodeID, "host", host, "pid", pid, "log", filepath.Join(dir, logFile))
	return idPrefix + strconv.Itoa(pid), nil
}

// startHost starts a compute's node host, detached (its own session) so
// that it outlives the server, and waits until it serves its socket.
func (p *Provider) startHost(ctx context.Context, host string, argv []string) error {
	if err := os.MkdirAll(host, 0o700); err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(host, hostLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(argv[0], append(argv[1:len(argv):len(argv)], "--host", host)...)
	cmd.Dir = host
	cmd.Env = agentEnv() // the nodes' tokens come over the socket, never in the environment
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survive the control plane
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node host: %w", err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it while this process lives
	if err := os.WriteFile(filepath.Join(host, hostPIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return fmt.Errorf("node host: %w", err)
	}
	c := agent.HostClient{Dir: host}
	for {
		if _, _, err := c.Nodes(ctx); err == nil {
			p.o.Log.Info("node host started", "host", host, "pid", pid, "log", filepath.Join(host, hostLogFile))
			return nil
		}
		if syscall.Kill(pid, 0) != nil { // reaped: it exited
			return fmt.Errorf("node host %s exited at start (see %s)", host, filepath.Join(host, hostLogFile))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node host %s: not serving: %w", host, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
