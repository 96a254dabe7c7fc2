package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func (s *server) createLowPriority(name string, max int32, grace string) {
	s.t.Helper()
	zero := int32(0)
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.VMPriority = api.PriorityLowPriority
	a.PreemptionGracePeriod = grace
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT30S"}
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

// nodeOf is the node running rank r of a job's current attempt.
func (s *server) nodeOf(job string, rank int) string {
	s.t.Helper()
	a := s.job(job).Properties.Attempts
	if len(a) == 0 || len(a[len(a)-1].Nodes) <= rank {
		s.t.Fatalf("job %s has no node of rank %d: %+v", job, rank, a)
	}
	return a[len(a)-1].Nodes[rank]
}

// checkpointing counts its attempts in $CUMULUS_CHECKPOINT_DIR/n and, on
// its first attempt, says "checkpoint saved" and runs until it is stopped.
const checkpointing = `n=$(cat "$CUMULUS_CHECKPOINT_DIR/n" 2>/dev/null || echo 0); echo "attempt=$CUMULUS_ATTEMPT found=$n"; echo $((n+1)) > "$CUMULUS_CHECKPOINT_DIR/n"; if [ "$CUMULUS_ATTEMPT" = 1 ]; then echo "checkpoint saved"; sleep 60; fi`

// checkpointed waits until a job running checkpointing has written its
// checkpoint (its log says so).
func (s *server) checkpointed(job string) {
	s.t.Helper()
	waitFor(s.t, job+" to save its checkpoint", 30*time.Second, func() bool {
		return strings.Contains(s.jobLog(job), "checkpoint saved")
	})
}

// A job on a preempted node is requeued and completes on a new node with
// attempt 2, its checkpoint from attempt 1 restored.
func TestPreemptedJobResumesFromCheckpoint(t *testing.T) {
	s := startServer(t)
	s.createLowPriority("spot", 1, "PT2S")
	s.submit("resumable", "spot", checkpointing)
	waitFor(t, "the job running", 30*time.Second, func() bool { return s.job("resumable").Properties.Status == api.JobRunning })
	s.checkpointed("resumable")
	victim := s.nodeOf("resumable", 0)
	if err := s.c.SimulateEviction(bctx, "spot", victim); err != nil {
		t.Fatal(err)
	}
	// A second notice during the grace period changes nothing.
	if err := s.c.SimulateEviction(bctx, "spot", victim); err != nil {
		t.Fatalf("second eviction during the grace period: %v", err)
	}
	j := s.waitJob("resumable", api.JobCompleted, 60*time.Second)
	at := j.Properties.Attempts
	if len(at) != 2 || !strings.Contains(at[0].Reason, "preempted on node "+victim) || at[1].Nodes[0] == victim {
		t.Fatalf("attempts = %+v, want 2, the first preempted on %s, the second elsewhere", at, victim)
	}
	if log := s.jobLog("resumable"); !strings.Contains(log, "attempt=2 found=1") {
		t.Fatalf("attempt 2 log = %q, want it to find attempt 1's checkpoint", log)
	}
	waitFor(t, "the preempted node gone", 20*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "spot")
		if err != nil {
			return false
		}
		for _, x := range n {
			if x.NodeID == victim {
				return false
			}
		}
		return true
	})
	// Dedicated clusters are not evictable.
	s.createCompute("dedicated", 1, 1, "PT30S")
	waitFor(t, "the dedicated node", 20*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "dedicated")
		return err == nil && len(n) == 1
	})
	n, _ := s.c.ListNodes(bctx, "dedicated")
	if err := s.c.SimulateEviction(bctx, "dedicated", n[0].NodeID); err == nil {
		t.Fatal("a dedicated node was evicted")
	}
}

// When one rank of a 2-node job is preempted, both ranks are stopped and
// the whole job runs again.
func TestPreemptingOneRankRestartsAllRanks(t *testing.T) {
	s := startServer(t)
	s.createLowPriority("spot2", 2, "PT1S")
	dir := t.TempDir()
	s.submitJob(distributedJob("two-ranks", "spot2", fmt.Sprintf(`echo $$ > %s/pid-$CUMULUS_ATTEMPT-$CUMULUS_NODE_RANK; if [ "$CUMULUS_ATTEMPT" = 1 ]; then sleep 60; fi`, dir), 2, "PyTorch", 1))
	waitFor(t, "both ranks running", 30*time.Second, func() bool {
		_, e0 := os.Stat(filepath.Join(dir, "pid-1-0"))
		_, e1 := os.Stat(filepath.Join(dir, "pid-1-1"))
		return e0 == nil && e1 == nil
	})
	if err := s.c.SimulateEviction(bctx, "spot2", s.nodeOf("two-ranks", 1)); err != nil {
		t.Fatal(err)
	}
	j := s.waitJob("two-ranks", api.JobCompleted, 60*time.Second)
	if at := j.Properties.Attempts; len(at) != 2 || len(at[1].Nodes) != 2 {
		t.Fatalf("attempts = %+v, want a second attempt on 2 nodes", at)
	}
	for _, rank := range []string{"0", "1"} {
		pid, err := os.ReadFile(filepath.Join(dir, "pid-1-"+rank))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "attempt 1 rank "+rank+" stopped", 15*time.Second, func() bool {
			_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
			return err != nil
		})
	}
}

// Chaos: 50 short jobs on a low-priority cluster whose nodes are evicted at
// random all complete.
func TestRandomEvictionChaos(t *testing.T) {
	s := startServer(t, "--eviction-rate", "1800", "--log-level", "info")
	s.createLowPriority("chaos", 4, "PT1S")
	for i := 0; i < 50; i++ {
		s.submit(fmt.Sprintf("chaos-%02d", i), "chaos", "sleep 0.5")
	}
	retried := 0
	for i := 0; i < 50; i++ {
		j := s.waitJob(fmt.Sprintf("chaos-%02d", i), api.JobCompleted, 180*time.Second)
		if len(j.Properties.Attempts) > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatal("no job was preempted: the chaos run proved nothing")
	}
	t.Logf("%d of 50 jobs were preempted at least once and completed", retried)
}

// A kill -9 of the server in the middle of a preemption: the job is still
// requeued and completes, and the nodes end consistent.
func TestServerKilledDuringPreemption(t *testing.T) {
	s := startServer(t)
	s.createLowPriority("spot3", 1, "PT3S")
	marks := t.TempDir()
	stopping, stopped := filepath.Join(marks, "stopping"), filepath.Join(marks, "stopped")
	s.submit("slow-stop", "spot3", `trap 'touch `+stopping+`; sleep 1; touch `+stopped+`; exit 143' TERM; `+checkpointing+` & wait`)
	waitFor(t, "the job running", 30*time.Second, func() bool { return s.job("slow-stop").Properties.Status == api.JobRunning })
	s.checkpointed("slow-stop")
	victim := s.nodeOf("slow-stop", 0)
	if err := s.c.SimulateEviction(context.Background(), "spot3", victim); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) func() bool {
		return func() bool { _, err := os.Stat(p); return err == nil }
	}
	waitFor(t, "the agent to pass the preemption notice to the job", 30*time.Second, exists(stopping))
	s.kill9() // the job stops, and the agent reports it, while the server is down
	waitFor(t, "the job to stop with the server down", 30*time.Second, exists(stopped))
	s.start()
	j := s.waitJob("slow-stop", api.JobCompleted, 60*time.Second)
	if len(j.Properties.Attempts) != 2 {
		t.Fatalf("attempts = %+v, want 2", j.Properties.Attempts)
	}
	waitFor(t, "one node, not the preempted one", 30*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "spot3")
		return err == nil && len(n) == 1 && n[0].NodeID != victim
	})
}
