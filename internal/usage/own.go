package usage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Own makes a node's CPU and memory figures its own rather than its
// machine's, for a node that shares its machine with others (a local
// node): CPU as a fraction of its size's vCPUs, memory against its size's.
// They come from the node's cgroup v2 when it has one (Cgroup: cpu.stat's
// usage_usec, memory.current), else from its jobs' processes (the sum of
// their process trees' CPU time and resident memory).
type Own struct {
	Cgroup      string // the node's cgroup folder ("" or unreadable: its jobs' processes)
	VCPUs       int
	MemoryBytes int64
	// Agent is the pid of the node's agent, counted with its jobs where
	// there is no cgroup (0: not counted).
	Agent int

	prevUsec   uint64    // cgroup CPU time at the previous sample
	prevAt     time.Time // when it was read
	prevAgent  uint64    // the agent's CPU ticks at the previous sample
	agentKnown bool
}

// agent adds the agent's own CPU ticks since the previous sample and its
// resident memory to the jobs'.
func (o *Own) agent(proc string, page int64, ticks uint64, mem int64) (uint64, int64) {
	if o.Agent <= 0 {
		return ticks, mem
	}
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(o.Agent), "stat"))
	if err != nil {
		return ticks, mem
	}
	p, err := ParseProcStat(b)
	if err != nil {
		return ticks, mem
	}
	if o.agentKnown && p.CPUTicks >= o.prevAgent {
		ticks += p.CPUTicks - o.prevAgent
	}
	o.prevAgent, o.agentKnown = p.CPUTicks, true
	return ticks, mem + p.RSSPages*page
}

// apply replaces u's CPU and memory figures with the node's own. jobTicks
// is the CPU time its jobs' processes took since the previous sample, in
// clock ticks, and jobMemory their resident memory now.
func (o *Own) apply(u *agentapi.Usage, now time.Time, jobTicks uint64, jobMemory int64) {
	if o.VCPUs > 0 {
		u.CPUs = o.VCPUs
	}
	if o.MemoryBytes > 0 {
		u.MemoryTotal = o.MemoryBytes
	}
	usec, memCur, ok := readCgroup(o.Cgroup)
	switch {
	case ok:
		if !o.prevAt.IsZero() && usec >= o.prevUsec && now.After(o.prevAt) {
			u.Interval = now.Sub(o.prevAt)
			u.CPU = cpuShare(float64(usec-o.prevUsec)/1e6, u.Interval, u.CPUs)
		} else {
			u.CPU = 0
		}
		o.prevUsec, o.prevAt = usec, now
		u.MemoryUsed = memCur
	default:
		o.prevAt = time.Time{}
		u.CPU = cpuShare(float64(jobTicks)/ClockTicks, u.Interval, u.CPUs)
		u.MemoryUsed = jobMemory
	}
}

// cpuShare is busy CPU seconds over an interval as a fraction of cpus.
func cpuShare(busy float64, over time.Duration, cpus int) float64 {
	if over <= 0 || cpus <= 0 {
		return 0
	}
	return min(max(busy/over.Seconds()/float64(cpus), 0), 1)
}

// readCgroup reads a cgroup's CPU time (cpu.stat usage_usec) and memory
// in use (memory.current); ok false when either cannot be read.
func readCgroup(dir string) (usec uint64, memory int64, ok bool) {
	if dir == "" {
		return 0, 0, false
	}
	stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0, false
	}
	usec, err = ParseCPUStat(stat)
	if err != nil {
		return 0, 0, false
	}
	cur, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, 0, false
	}
	memory, err = strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
	return usec, memory, err == nil
}

// ParseCPUStat reads usage_usec, the CPU time of a cgroup v2's
// processes in microseconds, from its cpu.stat.
func ParseCPUStat(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "usage_usec" {
			return strconv.ParseUint(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("cpu.stat: no usage_usec")
}
