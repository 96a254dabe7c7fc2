package api

import "time"

// UsageSamples is the answer of GET …/computes/{name}/usageSamples and
// …/jobs/{name}/usageSamples (a Cumulus extension): utilization samples,
// oldest first.
type UsageSamples struct {
	Value []UsageSample `json:"value"`
}

// UsageSample is one utilization sample of a node, or of a job on one of
// its nodes. Utilizations are fractions (0–1). A job's sample has no disk
// or network (they are the node's) and no memory total.
type UsageSample struct {
	Time    time.Time     `json:"time"`
	Node    string        `json:"node"`
	CPU     UsageCPU      `json:"cpu"`
	Memory  UsageMemory   `json:"memory"`
	GPUs    []UsageGPU    `json:"gpus"`
	Disk    *UsageDisk    `json:"disk,omitempty"`
	Network *UsageNetwork `json:"network,omitempty"`
}

// UsageCPU: the fraction of the node's CPU time spent busy (by the job,
// for a job's sample), how many CPUs the node has, and for a job the CPU
// seconds its processes used since it started.
type UsageCPU struct {
	Utilization float64 `json:"utilization"`
	CPUs        int     `json:"cpus,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
}

// UsageMemory is memory in use (a node: total − available; a job: the
// resident memory of its processes).
type UsageMemory struct {
	UsedBytes  int64 `json:"usedBytes"`
	TotalBytes int64 `json:"totalBytes,omitempty"`
}

// UsageGPU is one GPU; Utilization is absent where the device does not
// report it.
type UsageGPU struct {
	Index            int      `json:"index"`
	Utilization      *float64 `json:"utilization,omitempty"`
	MemoryUsedBytes  int64    `json:"memoryUsedBytes"`
	MemoryTotalBytes int64    `json:"memoryTotalBytes,omitempty"`
}

// UsageDisk is the node's disk where jobs run.
type UsageDisk struct {
	UsedBytes  int64 `json:"usedBytes"`
	TotalBytes int64 `json:"totalBytes"`
}

// UsageNetwork is bytes the node received and sent since it started.
type UsageNetwork struct {
	ReceivedBytes int64 `json:"receivedBytes"`
	SentBytes     int64 `json:"sentBytes"`
}
