package scale

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuGroup is a cgroup that the benchmark puts processes in to measure
// the CPU they and their children use: cgroup v2's cpu.stat where the
// machine has it unified, else cgroup v1's cpuacct. A process's children
// stay in its group unless something moves them; extra cgroups (a local
// node's, cumulus/<node>, where the agent puts its jobs on cgroup v2) are
// added to the figure.
type cpuGroup struct {
	dir   string
	v2    bool
	extra []string
}

// newCPUGroup makes a group named name for this benchmark and removes it
// when the benchmark ends (its processes are gone by then).
func newCPUGroup(b *testing.B, name string) *cpuGroup {
	b.Helper()
	g := &cpuGroup{}
	base := "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		g.v2 = true
	} else if _, err := os.Stat(filepath.Join(base, "cpuacct", "cpuacct.usage")); err == nil {
		base = filepath.Join(base, "cpuacct")
	} else {
		b.Skip("no cgroup v2 and no cgroup v1 cpuacct here: CPU per process group cannot be measured")
	}
	g.dir = filepath.Join(base, fmt.Sprintf("cumulus-vs-%d-%s", os.Getpid(), name))
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		b.Skipf("cannot make a cgroup (root needed): %v", err)
	}
	b.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.Remove(g.dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return g
}

// command is name started in this group: a shell moves itself into the
// group and then becomes name, so that nothing it starts escapes.
func (g *cpuGroup) command(name string, args ...string) *exec.Cmd {
	script := `echo $$ > "$CGROUP_PROCS" && exec "$0" "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, name}, args...)...)
	cmd.Env = append(os.Environ(), "CGROUP_PROCS="+filepath.Join(g.dir, "cgroup.procs"))
	return cmd
}

// add moves a running process into the group (its later children follow).
func (g *cpuGroup) add(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// usage is the CPU time used in the group and its extra cgroups so far.
func (g *cpuGroup) usage() time.Duration {
	total := g.usageOf(g.dir)
	for _, d := range g.extra {
		total += g.usageOf(d)
	}
	return total
}

func (g *cpuGroup) usageOf(dir string) time.Duration {
	if g.v2 {
		raw, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return time.Duration(n) * time.Microsecond
			}
		}
		return 0
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return time.Duration(n)
}

// pids are the processes in the group and its extra cgroups.
func (g *cpuGroup) pids() []int {
	var pids []int
	for _, d := range append([]string{g.dir}, g.extra...) {
		raw, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// memory is the resident (RSS) and proportional (PSS) memory of the
// group's processes, in KiB, from /proc/<pid>/smaps_rollup: PSS shares
// each page among the processes that map it, so the figures of several
// processes of one binary add up to what they cost the machine.
func (g *cpuGroup) memory() (rss, pss int, procs int) {
	for _, pid := range g.pids() {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		procs++
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			n, _ := strconv.Atoi(fields[1])
			switch fields[0] {
			case "Rss:":
				rss += n
			case "Pss:":
				pss += n
			}
		}
		f.Close()
	}
	return rss, pss, procs
}
