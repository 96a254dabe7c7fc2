package agent

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

// The agent samples on its usage clock and sends the latest sample with
// its polls: the node's memory and disk, and for a running job its
// process tree's memory and the utilization of the GPU it was given.
func TestPollsCarryUsage(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	startAgent(t, f, func(c *Config) {
		c.UsageClock, c.UsageInterval = clk, 15*time.Second
		c.DetectGPUs = func(context.Context) ([]agentapi.GPU, error) {
			return []agentapi.GPU{{Index: 0, Name: "A"}, {Index: 1, Name: "A"}}, nil
		}
		c.QueryGPUs = func(context.Context) ([]byte, error) { return []byte("0, 5, 100, 40960\n1, 30, 2000, 40960\n"), nil }
	})
	lastUsage := func() *agentapi.Usage {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.polls) == 0 {
			return nil
		}
		return f.polls[len(f.polls)-1].Usage
	}
	f.waitFor(10*time.Second, "a poll with the first sample", func() bool { return lastUsage() != nil })
	u := lastUsage()
	if u.MemoryTotal <= 0 || u.MemoryUsed <= 0 || u.DiskTotal <= 0 || u.CPUs <= 0 || len(u.GPUs) != 2 || len(u.Jobs) != 0 {
		t.Fatalf("first sample = %+v", u)
	}

	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "train", Attempt: 1, GPUs: []int{1},
		Env: map[string]string{"GATE": gate}, Command: `read go < "$GATE"`}})
	g := reachGate(t, gate)
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("train")) > 0 })
	blockUntil(t, clk, 1) // the sampler waits for its next tick
	clk.Step(15 * time.Second)
	f.waitFor(10*time.Second, "a sample of the job", func() bool { u := lastUsage(); return u != nil && len(u.Jobs) == 1 })
	u = lastUsage()
	j := u.Jobs[0]
	if j.UID != "train" || j.Attempt != 1 || j.MemoryUsed <= 0 {
		t.Errorf("job sample = %+v, want train's memory", j)
	}
	if mean, ok := agentapi.GPUUtilization(j.GPUs); !ok || mean != 0.3 || len(j.GPUs) != 1 || j.GPUs[0].Index != 1 {
		t.Errorf("job GPUs = %+v, want device 1 at 30%%", j.GPUs)
	}
	if u.Interval != 15*time.Second {
		t.Errorf("interval = %v, want the usage clock's 15s", u.Interval)
	}
	g.pass()
	f.exited("train", 10*time.Second)
}
