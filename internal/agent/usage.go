package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/usage"
)

// DefaultUsageInterval is how often an agent samples utilization when
// neither its configuration nor the server says.
const DefaultUsageInterval = 15 * time.Second

// startSampling samples the node's and its jobs' utilization every
// interval until the returned stop is called; each poll carries the
// latest sample.
func (a *agent) startSampling(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.sampleLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (a *agent) sampleLoop(ctx context.Context) {
	// Its own clock: tests that step the agent's clock for its protocol
	// timers do not see the sampler's timer among theirs.
	clk := a.cfg.UsageClock
	if clk == nil {
		clk = clock.Real{}
	}
	s := &usage.Sampler{Dir: a.cfg.WorkDir}
	if a.cfg.VCPUs > 0 || a.cfg.MemoryMB > 0 {
		// A node of a size (a provider made it): its figures are its own,
		// from its cgroup (limits.go) or its jobs, not the machine's.
		s.Own = &usage.Own{Cgroup: a.nodeCgroupDir(), VCPUs: a.cfg.VCPUs, MemoryBytes: int64(a.cfg.MemoryMB) << 20, Agent: os.Getpid()}
	}
	if own := measuredGPUs(a.gpus); len(own) > 0 {
		// The node's own GPUs only: the machine may have others, which
		// are other nodes'.
		s.QueryGPUs, s.GPUs = a.cfg.QueryGPUs, own
		if s.QueryGPUs == nil {
			s.QueryGPUs = nvidiaSMI
		}
	}
	failing := false
	for {
		u, err := s.Sample(ctx, clk.Now().UTC(), a.sampledJobs())
		switch {
		case err != nil && !failing:
			// Once: a node without, say, a readable /proc/net says so at
			// every sample.
			a.logger().Warn("part of the node's utilization cannot be read; it is left out", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		a.mu.Lock()
		a.usage = &u
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-clk.After(a.usageInterval()):
		}
	}
}

// usageInterval is the configured sampling interval, else the server's,
// else DefaultUsageInterval.
func (a *agent) usageInterval() time.Duration {
	if a.cfg.UsageInterval > 0 {
		return a.cfg.UsageInterval
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.usageEvery > 0 {
		return a.usageEvery
	}
	return DefaultUsageInterval
}

// latestUsage is the latest sample, for the next poll (nil before the
// first).
func (a *agent) latestUsage() *agentapi.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage
}

// sampledJobs are the jobs whose processes run now, with their process
// groups and the GPUs they were given.
func (a *agent) sampledJobs() []usage.Job {
	var out []usage.Job
	for _, j := range a.jobList() {
		pgid := int(j.pgid.Load())
		if pgid <= 0 {
			continue // not started, or over
		}
		j.mu.Lock()
		started := j.state.Started
		j.mu.Unlock()
		if started.IsZero() {
			continue // starting: measured from the next sample
		}
		// A job in containers is measured by its docker clients only:
		// the container's processes are the engine's children.
		out = append(out, usage.Job{UID: j.asg.UID, Attempt: j.asg.Attempt, PGID: pgid, Started: started, GPUs: j.asg.GPUs})
	}
	return out
}

// nvidiaSMI asks nvidia-smi for the GPUs' utilization and memory.
func nvidiaSMI(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nvidia-smi", usage.GPUQueryArgs...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
