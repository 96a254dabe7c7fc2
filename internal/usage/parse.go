// Package usage measures what a node and its jobs use: CPU, memory, disk,
// network and GPUs. The parsers of /proc files and of nvidia-smi's output
// are pure functions of the bytes read; Sampler does the reading.
package usage

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
)

// ClockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every
// Linux architecture Cumulus runs on.
const ClockTicks = 100

// CPUTimes are the node's CPU times from the "cpu" line of /proc/stat, in
// clock ticks, all CPUs together.
type CPUTimes struct {
	Busy, Total uint64
}

// ParseStat reads /proc/stat: the node's CPU times and how many CPUs it
// has (cpuN lines). Idle time is idle + iowait; guest time is already
// counted in user and nice, so it is not added again.
func ParseStat(b []byte) (CPUTimes, int, error) {
	var t CPUTimes
	found, cpus := false, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			cpus++
			continue
		}
		if len(f) < 5 {
			return t, 0, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
		}
		var v [8]uint64 // user nice system idle iowait irq softirq steal
		for i := 1; i < len(f) && i <= len(v); i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return t, 0, fmt.Errorf("/proc/stat: cpu field %d %q is not a number", i, f[i])
			}
			v[i-1] = n
		}
		for _, n := range v {
			t.Total += n
		}
		t.Busy = t.Total - v[3] - v[4]
		found = true
	}
	if err := sc.Err(); err != nil {
		return t, 0, err
	}
	if !found {
		return t, 0, fmt.Errorf("/proc/stat: no cpu line")
	}
	return t, cpus, nil
}

// CPUUtilization is the fraction of CPU time spent busy between two
// readings of /proc/stat (0 when no time passed or the counters went back).
func CPUUtilization(prev, cur CPUTimes) float64 {
	if cur.Total <= prev.Total || cur.Busy < prev.Busy {
		return 0
	}
	u := float64(cur.Busy-prev.Busy) / float64(cur.Total-prev.Total)
	return min(max(u, 0), 1)
}

// ParseMeminfo reads /proc/meminfo: used memory is MemTotal −
// MemAvailable (what the kernel could not hand out without swapping), in
// bytes. A kernel older than 3.14 has no MemAvailable: then MemFree +
// Buffers + Cached stands in for it.
func ParseMeminfo(b []byte) (used, total int64, err error) {
	vals := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/meminfo: %s %q is not a number", key, f[0])
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		vals[key] = n
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	total, ok := vals["MemTotal"]
	if !ok {
		return 0, 0, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	avail, ok := vals["MemAvailable"]
	if !ok {
		avail = vals["MemFree"] + vals["Buffers"] + vals["Cached"]
	}
	return max(total-avail, 0), total, nil
}

// ParseNetDev reads /proc/net/dev: bytes received and sent since the
// machine started, summed over every interface but loopback ("lo"). A
// node whose only interface is loopback (a container without a network)
// counts 0: its traffic never leaves the machine. Nodes of the local
// provider share the host's interfaces, so each reports the host's bytes.
func ParseNetDev(b []byte) (rx, tx int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue // the two header lines
		}
		name = strings.TrimSpace(name)
		if name == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("/proc/net/dev: short line for %s", name)
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		t, err2 := strconv.ParseInt(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("/proc/net/dev: %s: byte counts %q, %q are not numbers", name, f[0], f[8])
		}
		rx += r
		tx += t
	}
	return rx, tx, sc.Err()
}

// Proc is what /proc/<pid>/stat says of one process.
type Proc struct {
	PID, PPID, PGID int
	// CPUTicks is user + system time, its own and that of the children it
	// has waited for, in clock ticks.
	CPUTicks uint64
	// RSSPages is its resident set, in pages.
	RSSPages int64
}

// ParseProcStat reads /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself: the fields
// after it are read from the last ')'.
func ParseProcStat(b []byte) (Proc, error) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Proc{}, fmt.Errorf("proc stat: no command name in %q", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return Proc{}, fmt.Errorf("proc stat: pid %q is not a number", s[:open])
	}
	// f[0] is field 3 (state); field n is f[n-3].
	f := strings.Fields(s[end+1:])
	if len(f) < 22 {
		return Proc{}, fmt.Errorf("proc stat of %d: %d fields after the name, want at least 22", pid, len(f))
	}
	num := func(field int) (int64, error) {
		n, err := strconv.ParseInt(f[field-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat of %d: field %d %q is not a number", pid, field, f[field-3])
		}
		return n, nil
	}
	p := Proc{PID: pid}
	var v [5]int64
	for i, field := range []int{4, 5, 14, 15, 24} { // ppid pgrp utime stime rss
		if v[i], err = num(field); err != nil {
			return Proc{}, err
		}
	}
	cu, err1 := num(16)
	cs, err2 := num(17)
	if err1 != nil || err2 != nil {
		cu, cs = 0, 0
	}
	p.PPID, p.PGID = int(v[0]), int(v[1])
	p.CPUTicks = uint64(max(v[2], 0) + max(v[3], 0) + max(cu, 0) + max(cs, 0))
	p.RSSPages = max(v[4], 0)
	return p, nil
}

// Tree is the processes of a job: those in its process group pgid and
// every descendant of theirs (a process that made a group or session of
// its own is still the job's).
func Tree(procs []Proc, pgid int) []Proc {
	children := map[int][]int{}
	byPID := make(map[int]Proc, len(procs))
	var queue []int
	for _, p := range procs {
		byPID[p.PID] = p
		children[p.PPID] = append(children[p.PPID], p.PID)
		if pgid > 0 && p.PGID == pgid {
			queue = append(queue, p.PID)
		}
	}
	seen := map[int]bool{}
	var out []Proc
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, byPID[pid])
		queue = append(queue, children[pid]...)
	}
	return out
}

// GPUQueryArgs are the nvidia-smi arguments whose output ParseGPUs reads.
var GPUQueryArgs = []string{"--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"}

// ParseGPUs reads the output of
// `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`:
// utilization in percent (returned as a fraction), memory in MiB (returned
// in bytes). A value nvidia-smi cannot read ([N/A], [Not Supported]) is
// left out: a nil utilization, a zero memory.
func ParseGPUs(out []byte) ([]agentapi.GPUUsage, error) {
	rows, err := gpu.Rows(out, "index, utilization, memory used, memory total")
	if err != nil {
		return nil, err
	}
	var gpus []agentapi.GPUUsage
	for _, r := range rows {
		f, n := r.Fields[:4], r.Line
		g := agentapi.GPUUsage{Index: r.Index}
		vals := [3]float64{}
		known := [3]bool{}
		for i, s := range f[1:] {
			if s == "" || strings.HasPrefix(s, "[") {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi line %d: %q is not a number", n, s)
			}
			vals[i], known[i] = v, true
		}
		if known[0] {
			u := min(max(vals[0]/100, 0), 1)
			g.Utilization = &u
		}
		g.MemoryUsed = int64(vals[1] * (1 << 20))
		g.MemoryTotal = int64(vals[2] * (1 << 20))
		gpus = append(gpus, g)
	}
	return gpus, nil
}
