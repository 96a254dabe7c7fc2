package agentapi

import (
	"strconv"
	"strings"
	"time"
)

// Usage is one utilization sample of a node and of the jobs it runs,
// taken by the agent. Utilizations are fractions (0–1); bytes are bytes.
// A value the node cannot measure is left out (zero, or nil for a GPU).
type Usage struct {
	Time time.Time `json:"time"`
	// Interval is the time the CPU utilization is measured over (the time
	// since the previous sample).
	Interval time.Duration `json:"interval"`
	// CPU is the fraction of the node's CPU time spent busy over Interval,
	// all CPUs together; CPUs is how many the node has.
	CPU  float64 `json:"cpu"`
	CPUs int     `json:"cpus,omitempty"`
	// MemoryUsed is MemTotal − MemAvailable of /proc/meminfo.
	MemoryUsed  int64 `json:"memoryUsed"`
	MemoryTotal int64 `json:"memoryTotal"`
	// DiskUsed and DiskTotal are of the file system of the agent's work
	// directory, where jobs run.
	DiskUsed  int64 `json:"diskUsed"`
	DiskTotal int64 `json:"diskTotal"`
	// NetworkReceived and NetworkSent are bytes since the machine started,
	// every interface but loopback (see usage.ParseNetDev).
	NetworkReceived int64      `json:"networkReceived"`
	NetworkSent     int64      `json:"networkSent"`
	GPUs            []GPUUsage `json:"gpus,omitempty"`
	Jobs            []JobUsage `json:"jobs,omitempty"`
}

// GPUUsage is one GPU's utilization. Utilization is nil where the device
// does not report it ([N/A], [Not Supported]).
type GPUUsage struct {
	Index       int      `json:"index"`
	Utilization *float64 `json:"utilization,omitempty"`
	MemoryUsed  int64    `json:"memoryUsed"`
	MemoryTotal int64    `json:"memoryTotal"`
}

// JobUsage is what one job's processes on the node use: CPU as a fraction
// of the node's CPUs over the sample's interval (CPUSeconds is the total
// since the job started), MemoryUsed the resident memory of its process
// tree, and GPUs the devices it was given.
type JobUsage struct {
	UID        string     `json:"uid"`
	Attempt    int        `json:"attempt"`
	CPU        float64    `json:"cpu"`
	CPUSeconds float64    `json:"cpuSeconds"`
	MemoryUsed int64      `json:"memoryUsed"`
	GPUs       []GPUUsage `json:"gpus,omitempty"`
}

// GPUUtilization is the mean utilization of the GPUs that report one
// (ok false: none does).
func GPUUtilization(gpus []GPUUsage) (mean float64, ok bool) {
	n := 0
	for _, g := range gpus {
		if g.Utilization != nil {
			mean += *g.Utilization
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return mean / float64(n), true
}

// FormatGPUs writes GPUs compactly, as the store keeps the latest sample
// of each node: "index:utilization:memoryUsed" comma-separated, an
// unknown utilization empty ("0:0.87:31457280000,1::104857600").
func FormatGPUs(gpus []GPUUsage) string {
	b := make([]byte, 0, 32*len(gpus))
	for i, g := range gpus {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(g.Index), 10)
		b = append(b, ':')
		if g.Utilization != nil {
			b = strconv.AppendFloat(b, *g.Utilization, 'g', -1, 64)
		}
		b = append(b, ':')
		b = strconv.AppendInt(b, g.MemoryUsed, 10)
	}
	return string(b)
}

// EachGPU calls f with each GPU of a FormatGPUs list, in order: its index,
// its utilization (ok false: unknown) and memory used. Malformed entries
// are skipped.
func EachGPU(s string, f func(index string, util float64, utilOK bool, memoryUsed string)) {
	for s != "" {
		var entry string
		entry, s, _ = strings.Cut(s, ",")
		idx, rest, ok1 := strings.Cut(entry, ":")
		util, mem, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || idx == "" {
			continue
		}
		u, err := strconv.ParseFloat(util, 64)
		f(idx, u, util != "" && err == nil, mem)
	}
}
