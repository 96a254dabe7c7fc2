package cluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/files"
)

// Real frameworks from Debian's packages (python3-torch, openmpi-bin,
// python3-mpi4py; scripts/test-setup.sh installs them) on local nodes.

// needPython skips (or, in CI, fails) when python3 cannot import modules.
func needPython(t *testing.T, modules ...string) {
	t.Helper()
	code := "import " + strings.Join(append([]string{"os"}, modules...), ", ")
	if out, err := exec.Command("/usr/bin/python3", "-c", code).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 cannot %s (scripts/test-setup.sh installs it): %v\n%s", code, err, out)
		}
		t.Skipf("python3 cannot %s: %v", code, err)
	}
}

func frameworkScript(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "frameworks", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A 3-node PyTorch DDP job over gloo whose rank 0 saves the model after
// the other ranks have finished: the job's output holds the model and
// every rank's own file, as one shared output location would.
func TestPyTorchDDPOutputsOfEveryRank(t *testing.T) {
	needPython(t, "torch")
	s := startServer(t)
	s.createCompute("ddp", 0, 3, "PT30S")
	s.submitJob(distributedJob("ddp-job", "ddp", "/usr/bin/python3 "+frameworkScript(t, "ddp.py"), 3, "PyTorch", 1))
	j := s.waitJob("ddp-job", api.JobCompleted, 3*time.Minute)
	if j.Properties.Status != api.JobCompleted {
		t.Fatalf("job %s: %s\n%s", j.Properties.Status, j.Properties.StatusMessage, s.rankLog("ddp-job", 0))
	}
	if log := s.rankLog("ddp-job", 2); !strings.Contains(log, "rank 2 world 3 allreduce 3") {
		t.Errorf("rank 2's log = %q; want its allreduce of ranks 0+1+2", log)
	}
	var b bytes.Buffer
	if err := s.c.JobOutput(bctx, "ddp-job", "default", &b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := files.Unpack(&b, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.pt", "rank0.txt", "rank1.txt", "rank2.txt"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("the job's output has no %s (%v)", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, files.ConflictsFile)); err == nil {
		t.Errorf("ranks that wrote different files are reported as conflicting")
	}
}

// An MPI job of 2 nodes × 2 processes runs plain mpi4py under mpirun,
// which Cumulus launches: the ranks see each other (sum 0+1+2+3 = 6) and
// run on both nodes.
func TestMPIJobLaunchedWithMpirun(t *testing.T) {
	needPython(t, "mpi4py")
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("no mpirun")
	}
	s := startServer(t)
	s.createCompute("mpi4py", 0, 2, "PT30S")
	s.submitJob(distributedJob("allreduce", "mpi4py", "/usr/bin/python3 "+frameworkScript(t, "allreduce.py"), 2, "Mpi", 2))
	j := s.waitJob("allreduce", api.JobCompleted, 2*time.Minute)
	log := s.rankLog("allreduce", 0)
	if j.Properties.Status != api.JobCompleted {
		t.Fatalf("job %s: %s\n%s\nnode 1:\n%s", j.Properties.Status, j.Properties.StatusMessage, log, s.rankLog("allreduce", 1))
	}
	ranks, nodes := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] == "rank" {
			if f[3] != "4" || f[5] != "6" {
				t.Errorf("line %q: want size 4 and sum 6", line)
			}
			ranks[f[1]], nodes[f[7]] = true, true
		}
	}
	if len(ranks) != 4 || len(nodes) != 2 {
		t.Fatalf("ranks %v on nodes %v; want 4 ranks on 2 nodes. Log:\n%s", ranks, nodes, log)
	}
}

// A Python job that takes 5 s to save its checkpoint after SIGTERM gets
// them when its node is preempted (the shell that runs it dies at once),
// and its next attempt resumes from that checkpoint.
func TestSIGTERMCheckpointResumes(t *testing.T) {
	needPython(t)
	s := startServer(t)
	s.createLowPriority("spot-py", 1, "PT30S")
	s.submit("saver", "spot-py", "/usr/bin/python3 "+frameworkScript(t, "sigterm_checkpoint.py"))
	waitFor(t, "the job training", 60*time.Second, func() bool { return strings.Contains(s.jobLog("saver"), "training") })
	if err := s.c.SimulateEviction(bctx, "spot-py", s.nodeOf("saver", 0)); err != nil {
		t.Fatal(err)
	}
	j := s.waitJob("saver", api.JobCompleted, 2*time.Minute)
	if n := len(j.Properties.Attempts); n != 2 {
		t.Fatalf("attempts = %+v; want 2", j.Properties.Attempts)
	}
	if log := s.jobLog("saver"); !strings.Contains(log, "resumed from step 42") {
		t.Fatalf("attempt 2's log = %q; want it to resume from the checkpoint saved after SIGTERM", log)
	}
}
