package usage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Job is a job a Sampler measures: its process group on this node, when
// it started and the GPUs it was given.
type Job struct {
	UID     string
	Attempt int
	PGID    int
	Started time.Time
	GPUs    []int
}

// Sampler takes samples of a node and its jobs. It keeps the previous
// CPU readings, so utilization is over the time between two samples. It
// is not safe for concurrent use.
type Sampler struct {
	// Proc is the proc file system ("" = /proc); tests point it at a
	// folder of sample files.
	Proc string
	// Dir is the folder whose file system's use is reported as the
	// node's disk (the agent's work dir).
	Dir string
	// QueryGPUs returns nvidia-smi's output for GPUQueryArgs; nil: the
	// node has no GPUs. GPUs, when not nil, are the indexes of the node's
	// own GPUs: the machine's others are left out of its figures.
	QueryGPUs func(ctx context.Context) ([]byte, error)
	GPUs      []int
	// PageSize is the size of a memory page (0 = os.Getpagesize()).
	PageSize int64
	// Own, when set, makes the node's CPU and memory figures its own
	// rather than the machine's (see Own).
	Own *Own

	prev     CPUTimes
	prevTime time.Time
	jobPrev  map[string]uint64 // CPU ticks of each job at the previous sample
}

// Sample reads the node's and the jobs' usage at now. A part that cannot
// be read is left out and named in the error; the sample is still
// returned with the rest.
func (s *Sampler) Sample(ctx context.Context, now time.Time, jobs []Job) (agentapi.Usage, error) {
	proc := s.Proc
	if proc == "" {
		proc = "/proc"
	}
	page := s.PageSize
	if page <= 0 {
		page = int64(os.Getpagesize())
	}
	u := agentapi.Usage{Time: now}
	var errs []error
	if b, err := os.ReadFile(filepath.Join(proc, "stat")); err != nil {
		errs = append(errs, fmt.Errorf("cpu: %w", err))
	} else if t, cpus, err := ParseStat(b); err != nil {
		errs = append(errs, err)
	} else {
		u.CPUs = cpus
		if !s.prevTime.IsZero() {
			u.CPU = CPUUtilization(s.prev, t)
			u.Interval = now.Sub(s.prevTime)
		}
		s.prev, s.prevTime = t, now
	}
	if b, err := os.ReadFile(filepath.Join(proc, "meminfo")); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	} else if u.MemoryUsed, u.MemoryTotal, err = ParseMeminfo(b); err != nil {
		errs = append(errs, err)
	}
	if b, err := os.ReadFile(filepath.Join(proc, "net", "dev")); err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	} else if u.NetworkReceived, u.NetworkSent, err = ParseNetDev(b); err != nil {
		errs = append(errs, err)
	}
	if s.Dir != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.Dir, &st); err != nil {
			errs = append(errs, fmt.Errorf("disk: statfs %s: %w", s.Dir, err))
		} else {
			bs := int64(st.Bsize)
			u.DiskTotal = int64(st.Blocks) * bs
			u.DiskUsed = (int64(st.Blocks) - int64(st.Bfree)) * bs
		}
	}
	if s.QueryGPUs != nil {
		out, err := s.QueryGPUs(ctx)
		if err == nil {
			u.GPUs, err = ParseGPUs(out)
		}
		if s.GPUs != nil {
			u.GPUs = slices.DeleteFunc(u.GPUs, func(g agentapi.GPUUsage) bool { return !slices.Contains(s.GPUs, g.Index) })
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("gpus: %w", err))
		}
	}
	var ticks uint64 // the jobs' CPU time since the previous sample
	var mem int64    // and their memory now
	if s.Own != nil && s.Own.VCPUs > 0 {
		u.CPUs = s.Own.VCPUs // the jobs' shares are of the node's vCPUs
	}
	if len(jobs) > 0 {
		procs, err := readProcs(proc)
		if err != nil {
			errs = append(errs, err)
		}
		u.Jobs, ticks = s.jobs(now, jobs, procs, u, page)
		for _, j := range u.Jobs {
			mem += j.MemoryUsed
		}
	} else {
		s.jobPrev = nil
	}
	if s.Own != nil {
		ticks, mem = s.Own.agent(proc, page, ticks, mem)
		s.Own.apply(&u, now, ticks, mem)
	}
	return u, errors.Join(errs...)
}

// jobs measures each job from the processes of its tree, and returns with
// them the CPU ticks all of them took since the previous sample.
func (s *Sampler) jobs(now time.Time, jobs []Job, procs []Proc, node agentapi.Usage, page int64) ([]agentapi.JobUsage, uint64) {
	var all uint64
	prev := s.jobPrev
	s.jobPrev = make(map[string]uint64, len(jobs))
	var out []agentapi.JobUsage
	for _, j := range jobs {
		ju := agentapi.JobUsage{UID: j.UID, Attempt: j.Attempt}
		var ticks uint64
		for _, p := range Tree(procs, j.PGID) {
			ticks += p.CPUTicks
			ju.MemoryUsed += p.RSSPages * page
		}
		key := j.UID + "#" + strconv.Itoa(j.Attempt)
		s.jobPrev[key] = ticks
		ju.CPUSeconds = float64(ticks) / ClockTicks
		// Over the interval since the previous sample, or since the job
		// started when this is its first.
		before, seen := prev[key]
		since := node.Interval
		if !seen {
			before, since = 0, now.Sub(j.Started)
		}
		if since > 0 && node.CPUs > 0 && ticks >= before {
			busy := float64(ticks-before) / ClockTicks
			ju.CPU = min(busy/since.Seconds()/float64(node.CPUs), 1)
		}
		if seen && ticks >= before {
			all += ticks - before
		}
		for _, idx := range j.GPUs {
			for _, g := range node.GPUs {
				if g.Index == idx {
					ju.GPUs = append(ju.GPUs, g)
				}
			}
		}
		out = append(out, ju)
	}
	return out, all
}

// readProcs reads /proc/<pid>/stat of every process; processes that end
// while it reads are skipped.
func readProcs(proc string) ([]Proc, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("processes: %w", err)
	}
	var out []Proc
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		if p, err := ParseProcStat(b); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
