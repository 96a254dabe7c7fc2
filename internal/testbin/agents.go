package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
