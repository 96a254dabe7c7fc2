package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// A cluster of min 0, max 2, idle 5 s runs three jobs on at most two nodes
// and returns to zero nodes after the idle time.
func TestClusterGrowsRunsAndShrinks(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	s.createCompute("cpu-cluster", 0, 2, "PT5S")
	names := []string{"job-a", "job-b", "job-c"}
	for _, n := range names {
		s.submit(n, "azureml:cpu-cluster", `echo "hello from $CUMULUS_JOB_NAME on $CUMULUS_NODE_ID"; sleep 1; echo "bye $CUMULUS_JOB_NAME" >&2`)
	}

	seen := map[string]bool{}
	maxNodes := 0
	waitFor(t, "all jobs to complete", 60*time.Second, func() bool {
		nodes, err := s.c.ListNodes(ctx, "cpu-cluster")
		if err != nil {
			t.Fatal(err)
		}
		maxNodes = max(maxNodes, len(nodes))
		for _, n := range nodes {
			seen[n.NodeID] = true
		}
		for _, n := range names {
			if st := s.job(n).Properties.Status; st != api.JobCompleted {
				if api.JobTerminal(st) {
					t.Fatalf("job %s ended %s: %s", n, st, s.job(n).Properties.StatusMessage)
				}
				return false
			}
		}
		return true
	})
	if maxNodes > 2 {
		t.Fatalf("saw %d nodes at once, max is 2", maxNodes)
	}
	for _, n := range names {
		j := s.job(n)
		log := s.jobLog(n)
		if !strings.Contains(log, "hello from "+n) || !strings.Contains(log, "bye "+n) {
			t.Fatalf("log of %s = %q, want its stdout and stderr lines", n, log)
		}
		if len(j.Properties.Attempts) != 1 || len(j.Properties.Attempts[0].Nodes) != 1 || !seen[j.Properties.Attempts[0].Nodes[0]] {
			t.Fatalf("job %s attempts = %+v, want one attempt on a node list-nodes showed", n, j.Properties.Attempts)
		}
		if j.Properties.StartTime == nil || j.Properties.EndTime == nil || len(j.Properties.History) < 4 {
			t.Fatalf("job %s history = %+v, want timestamped Queued→Preparing→Running→Completed", n, j.Properties.History)
		}
	}
	// list-nodes and the compute's counts agree while the nodes idle.
	comp, err := s.c.GetCompute(ctx, "cpu-cluster")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := s.c.ListNodes(ctx, "cpu-cluster")
	if err != nil {
		t.Fatal(err)
	}
	var counts api.NodeStateCounts
	for _, n := range nodes {
		counts.Count(n.NodeState)
	}
	a := comp.Aml()
	if int(a.CurrentNodeCount) != len(nodes) || a.NodeStateCounts != counts {
		t.Fatalf("compute says current=%d counts=%+v; list-nodes says %d nodes %+v", a.CurrentNodeCount, a.NodeStateCounts, len(nodes), counts)
	}
	// Back to zero within the idle time and a few seconds.
	start := time.Now()
	waitFor(t, "the cluster to shrink to zero", 15*time.Second, func() bool {
		c, err := s.c.GetCompute(ctx, "cpu-cluster")
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.c.ListNodes(ctx, "cpu-cluster")
		if err != nil {
			t.Fatal(err)
		}
		return c.Aml().CurrentNodeCount == 0 && len(n) == 0 && c.Aml().AllocationState == api.AllocationSteady
	})
	t.Logf("shrank to zero %s after the last job ended", time.Since(start).Round(100*time.Millisecond))
	waitFor(t, "agent processes to exit", 15*time.Second, func() bool { return len(agents(s.dataDir)) == 0 })
}

// A kill -9 of the control plane while jobs run loses nothing: running jobs
// keep running on their agents and finish with their whole log, the queued
// job stays queued and runs, and no agent process is left behind.
func TestServerKill9WhileJobsRun(t *testing.T) {
	s := startServer(t)
	s.createCompute("cpu-cluster", 0, 2, "PT3S")
	marks := t.TempDir()
	// Each job leaves a mark in marks/ when it has printed its last line, so
	// the test knows the running jobs finished without the server.
	script := `for i in 1 2 3 4 5 6; do echo "$CUMULUS_JOB_NAME line $i"; sleep 0.5; done; touch ` + marks + `/$CUMULUS_JOB_NAME`
	for _, n := range []string{"run-1", "run-2", "queued-3"} {
		s.submit(n, "cpu-cluster", script)
	}
	waitFor(t, "two jobs running", 30*time.Second, func() bool {
		return s.job("run-1").Properties.Status == api.JobRunning && s.job("run-2").Properties.Status == api.JobRunning
	})
	if st := s.job("queued-3").Properties.Status; st != api.JobQueued {
		t.Fatalf("third job %s, want Queued at max 2", st)
	}
	s.kill9()
	if got := testbin.RunningNodes(s.dataDir); len(got) < 2 {
		t.Fatalf("nodes %v run after the server died, want the 2 running ones alive", got)
	}
	waitFor(t, "the running jobs to finish without the server", 30*time.Second, func() bool {
		for _, n := range []string{"run-1", "run-2"} {
			if _, err := os.Stat(filepath.Join(marks, n)); err != nil {
				return false
			}
		}
		return true
	})
	s.start()

	for _, n := range []string{"run-1", "run-2", "queued-3"} {
		waitFor(t, n+" to complete", 60*time.Second, func() bool {
			st := s.job(n).Properties.Status
			if api.JobTerminal(st) && st != api.JobCompleted {
				t.Fatalf("%s ended %s: %s", n, st, s.job(n).Properties.StatusMessage)
			}
			return st == api.JobCompleted
		})
		j := s.job(n)
		if len(j.Properties.Attempts) != 1 {
			t.Fatalf("%s ran %d attempts, want 1 (nothing restarted)", n, len(j.Properties.Attempts))
		}
		log := s.jobLog(n)
		for i := 1; i <= 6; i++ {
			want := fmt.Sprintf("%s line %d\n", n, i)
			if strings.Count(log, want) != 1 {
				t.Fatalf("log of %s has %q %d times, want once; log:\n%s", n, want, strings.Count(log, want), log)
			}
		}
	}
	waitFor(t, "nodes to go after the idle time", 20*time.Second, func() bool {
		n, err := s.c.ListNodes(context.Background(), "cpu-cluster")
		return err == nil && len(n) == 0
	})
	waitFor(t, "no agent process left", 15*time.Second, func() bool { return len(agents(s.dataDir)) == 0 })
}

// A node's agent stopped (SIGTERM: its machine going away) while the
// control plane is down: the agent stops the job and reports the exit once
// the server is back. That exit is not the job's failure: the job is
// requeued and completes on another node.
func TestNodeStoppedWhileServerDownRequeuesTheJob(t *testing.T) {
	s := startServer(t)
	s.createCompute("stopc", 0, 1, "PT30S")
	s.submit("victim", "stopc", `if [ "$CUMULUS_ATTEMPT" = 1 ]; then sleep 300; fi; echo "attempt $CUMULUS_ATTEMPT"`)
	waitFor(t, "the job to run", 30*time.Second, func() bool { return s.job("victim").Properties.Status == api.JobRunning })
	pids := agents(s.dataDir)
	if len(pids) != 1 {
		t.Fatalf("%d agents; want 1", len(pids))
	}
	s.kill9()
	if err := syscall.Kill(pids[0], syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.start()
	j := s.waitJob("victim", api.JobCompleted, 60*time.Second)
	if a := j.Properties.Attempts; len(a) != 2 || !strings.Contains(a[0].Reason, "stopped") {
		t.Fatalf("attempts %+v; want the first ended because its node stopped, and a second", a)
	}
}
