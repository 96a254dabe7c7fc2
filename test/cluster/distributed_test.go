package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func (s *server) submitJob(j api.Job) {
	s.t.Helper()
	if _, err := s.c.PutJob(context.Background(), j); err != nil {
		s.t.Fatal(err)
	}
}

func distributedJob(name, compute, command string, instances int32, dist string, ppn int32) api.Job {
	j := api.Job{Name: name, Properties: api.JobProperties{Command: command, ComputeID: compute,
		Resources: &api.JobResources{InstanceCount: instances}}}
	if dist != "" {
		j.Properties.Distribution = &api.Distribution{DistributionType: dist, ProcessCountPerInstance: ppn}
	}
	return j
}

// rankLog reads the whole log of one node rank of a job's latest attempt.
func (s *server) rankLog(name string, rank int) string {
	s.t.Helper()
	var out strings.Builder
	var off int64
	for {
		chunk, err := s.c.JobLog(context.Background(), name, -1, rank, off)
		if err != nil {
			s.t.Fatal(err)
		}
		if chunk.Content == "" {
			return out.String()
		}
		out.WriteString(chunk.Content)
		off += int64(len(chunk.Content))
	}
}

func (s *server) waitJob(name string, want string, timeout time.Duration) api.Job {
	s.t.Helper()
	var j api.Job
	deadline := time.Now().Add(timeout)
	for j = s.job(name); !api.JobTerminal(j.Properties.Status); j = s.job(name) {
		if time.Now().After(deadline) { // what it waits for says why (a node that cannot start, a quota)
			s.t.Fatalf("timed out after %s waiting for %s to end: %s (%s)", timeout, name, j.Properties.Status, j.Properties.StatusMessage)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if j.Properties.Status != want {
		var logs strings.Builder
		for rank := range j.InstanceCount() {
			fmt.Fprintf(&logs, "\n--- node rank %d:\n%s", rank, s.rankLog(name, rank))
		}
		s.t.Fatalf("job %s ended %s (%s), want %s%s", name, j.Properties.Status, j.Properties.StatusMessage, want, logs.String())
	}
	return j
}

func buildRendezvous(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rendezvous")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/rendezvous").CombinedOutput()
	if err != nil {
		t.Fatalf("build rendezvous: %v\n%s", err, out)
	}
	return bin
}

// A 3-node PyTorch job: the ranks find each other at MASTER_ADDR:MASTER_PORT
// over TCP and rank 0 sums their ranks.
func TestPyTorchRanksRendezvous(t *testing.T) {
	bin := buildRendezvous(t)
	s := startServer(t)
	s.createCompute("dist", 0, 3, "PT30S")
	s.submitJob(distributedJob("torch", "dist", bin, 3, "PyTorch", 1))
	j := s.waitJob("torch", api.JobCompleted, 60*time.Second)
	if got := s.rankLog("torch", 0); !strings.Contains(got, "rank 0 of 3: sum=3") {
		t.Fatalf("rank 0 log = %q, want the sum of ranks 1 and 2", got)
	}
	for r := 1; r <= 2; r++ {
		if got := s.rankLog("torch", r); !strings.Contains(got, fmt.Sprintf("rank %d of 3: master said ok", r)) {
			t.Fatalf("rank %d log = %q", r, got)
		}
	}
	if n := len(j.Properties.Attempts[0].Nodes); n != 3 {
		t.Fatalf("job ran on %d nodes, want 3", n)
	}
}

// An MPI job in the per-process mode (MPI_LAUNCHER=none: no
// mpirun, each rank started by its node with the OMPI_* and PMI_*
// variables) with 2 processes per node on 2 nodes sees 4 distinct ranks.
func TestMPITwoProcessesPerNode(t *testing.T) {
	s := startServer(t)
	s.createCompute("mpi", 0, 2, "PT30S")
	j := distributedJob("mpi-job", "mpi", `echo "rank=$OMPI_COMM_WORLD_RANK size=$OMPI_COMM_WORLD_SIZE local=$OMPI_COMM_WORLD_LOCAL_RANK master=$AZ_BATCH_MASTER_NODE"; cat "$CUMULUS_HOSTFILE" | wc -l`, 2, "Mpi", 2)
	j.Properties.EnvironmentVariables = map[string]string{"MPI_LAUNCHER": "none"}
	s.submitJob(j)
	s.waitJob("mpi-job", api.JobCompleted, 60*time.Second)
	ranks := map[string]bool{}
	for node := 0; node < 2; node++ {
		for _, line := range strings.Split(s.rankLog("mpi-job", node), "\n") {
			if i := strings.Index(line, "rank="); i >= 0 {
				f := strings.Fields(line[i:])
				ranks[f[0]] = true
				if f[1] != "size=4" {
					t.Fatalf("line %q: want size=4", line)
				}
				if !strings.HasPrefix(line, "[rank ") {
					t.Fatalf("line %q is not prefixed with its rank", line)
				}
			}
		}
	}
	if len(ranks) != 4 {
		t.Fatalf("saw ranks %v, want 4 distinct", ranks)
	}
}

// Two 2-node jobs on a max-3 cluster run one after the other: neither
// holds part of the nodes while waiting for the rest.
func TestTwoGangJobsDoNotDeadlock(t *testing.T) {
	s := startServer(t)
	s.createCompute("gang", 0, 3, "PT30S")
	s.submitJob(distributedJob("gang-1", "gang", "sleep 1", 2, "", 0))
	s.submitJob(distributedJob("gang-2", "gang", "sleep 1", 2, "", 0))
	a := s.waitJob("gang-1", api.JobCompleted, 60*time.Second)
	b := s.waitJob("gang-2", api.JobCompleted, 60*time.Second)
	// The second can start only once a node of the first is free again
	// (each rank sleeps 1 s): 4 nodes are never busy at once.
	first, second := a, b
	if b.Properties.StartTime.Before(*a.Properties.StartTime) {
		first, second = b, a
	}
	if gap := second.Properties.StartTime.Sub(*first.Properties.StartTime); gap < 900*time.Millisecond {
		t.Fatalf("the second 2-node job started %s after the first, before any of its nodes was free", gap)
	}
	nodes, err := s.c.ListNodes(bctx, "gang")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) > 3 {
		t.Fatalf("%d nodes, max is 3", len(nodes))
	}
}

// When one rank fails, the others are stopped within seconds and the job
// fails with that rank's exit code.
func TestRankFailureStopsTheOtherRanks(t *testing.T) {
	s := startServer(t)
	s.createCompute("fail", 0, 2, "PT30S")
	marker := filepath.Join(t.TempDir(), "survivor")
	s.submitJob(distributedJob("one-fails", "fail",
		fmt.Sprintf(`if [ "$RANK" = 1 ]; then sleep 1; exit 7; fi; echo $$ > %s; sleep 60`, marker), 2, "PyTorch", 1))
	j := s.waitJob("one-fails", api.JobFailed, 30*time.Second)
	if !strings.Contains(j.Properties.StatusMessage, "exit code 7") {
		t.Fatalf("status message %q does not name the failing rank's exit code", j.Properties.StatusMessage)
	}
	if took := j.Properties.EndTime.Sub(*j.Properties.StartTime); took > 10*time.Second {
		t.Fatalf("the job took %s to fail, want a few seconds", took)
	}
	pid, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rank 0's process to be stopped", 15*time.Second, func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return err != nil
	})
	waitFor(t, "both nodes idle again", 15*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "fail")
		if err != nil || len(n) != 2 {
			return false
		}
		return n[0].NodeState == api.NodeIdle && n[1].NodeState == api.NodeIdle
	})
}
