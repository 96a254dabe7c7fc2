package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cumulus-ml/cumulus/internal/agent"
	"github.com/cumulus-ml/cumulus/internal/config"
)

// Agents lists the running agent processes of a server's local-provider
// nodes (whose work dirs are under <data dir>-nodes, config.NodesDir).
// They outlive the server that started them, as nodes do.
func Agents(dataDir string) []int {
	nodesDir := config.NodesDir(dataDir)
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, " agent ") && strings.Contains(cmd, " "+nodesDir+"/") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				continue // a zombie is not running
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// KillAgents kills the agent processes of a server's local-provider nodes
// and their process groups (the jobs they run); it returns how many.
func KillAgents(dataDir string) int {
	pids := Agents(dataDir)
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids)
}

// NodePID is the pid of the process that runs a local node's agent: its
// own (agent.pid in its folder) or, for a node of a node host, the host's
// (agent.host names the host's folder, which holds host.pid). Killing it
// kills the node (and, for a host, every node of its compute).
func NodePID(dataDir, node string) (int, error) {
	dir := filepath.Join(config.NodesDir(dataDir), node)
	pidFile := filepath.Join(dir, "agent.pid")
	if host, err := os.ReadFile(filepath.Join(dir, "agent.host")); err == nil {
		pidFile = filepath.Join(strings.TrimSpace(string(host)), "host.pid")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("node %s: %w", node, err)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil {
		return 0, fmt.Errorf("node %s: pid %q: %w", node, b, err)
	}
	return pid, nil
}

// RunningNodes lists the local nodes of a server whose agents run: a node
// of a node host while the host holds its lock, another while its agent
// process lives.
func RunningNodes(dataDir string) []string {
	var out []string
	ents, _ := os.ReadDir(config.NodesDir(dataDir))
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(config.NodesDir(dataDir), e.Name())
		if _, err := os.Stat(filepath.Join(dir, "agent.host")); err == nil {
			if agent.HostedNodeRuns(dir) {
				out = append(out, e.Name())
			}
			continue
		}
		if pid, err := NodePID(dataDir, e.Name()); err == nil && syscall.Kill(pid, 0) == nil && slices.Contains(Agents(dataDir), pid) {
			out = append(out, e.Name())
		}
	}
	return out
}
