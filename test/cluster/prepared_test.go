package cluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// After a container job, a node prepares the containers of the next jobs
// of that image (label cumulus.prepared); a job that takes one runs in the
// directory the container mounted, jobs/prepared-<n>.

// preparedOf lists the running prepared containers of node.
func preparedOf(node string) []string {
	out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=cumulus.prepared", "--filter", "label=cumulus.job-node="+node).Output()
	return strings.Fields(string(out))
}

// warmImageNode starts a server with one warm node that has run a job of
// the test image, and waits for the node's prepared container.
func warmImageNode(t *testing.T, compute string) (*server, string) {
	t.Helper()
	requireDocker(t)
	s := startServer(t)
	s.createCompute(compute, 1, 1, "PT10M")
	s.createEnvironment("busybox", "1", testImage)
	s.submitJob(imageJob("warm-up", compute, "azureml:busybox:1", "true"))
	s.waitJob("warm-up", api.JobCompleted, 60*time.Second)
	node := s.nodeOf("warm-up", 0)
	waitFor(t, "a prepared container on the node", 30*time.Second, func() bool { return len(preparedOf(node)) >= 1 })
	return s, node
}

func exitCodeOf(t *testing.T, j api.Job) int {
	t.Helper()
	a := j.Properties.Attempts
	if len(a) == 0 || a[len(a)-1].ExitCode == nil {
		t.Fatalf("job %s has no exit code: %+v", j.Name, a)
	}
	return *a[len(a)-1].ExitCode
}

func outputFile(t *testing.T, s *server, job, name string) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.c.JobOutput(bctx, job, "default", &b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := files.Unpack(&b, dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, name))
	return string(got)
}

// Two jobs in a row on a warm node each run in a fresh prepared container
// of the image: they see the image's files and their own variables (which
// no container's inspect shows), write outputs the server receives, end
// with their own exit codes, and the second does not see what the first
// left outside its directory.
func TestPreparedContainersRunConsecutiveJobs(t *testing.T) {
	s, _ := warmImageNode(t, "prep")
	first := imageJob("first", "prep", "azureml:busybox:1",
		`cat /cumulus-test-marker; echo "var=$MY_VAR dir=$PWD"; echo one > "$CUMULUS_OUTPUT_DIR/r.txt"; echo left > /tmp/left-behind; echo started; sleep 1`)
	first.Properties.EnvironmentVariables = map[string]string{"MY_VAR": "s3cret-1"}
	s.submitJob(first)
	waitFor(t, "the first job running", 30*time.Second, func() bool { return strings.Contains(s.jobLog("first"), "started") })
	ids, _ := exec.Command("docker", "ps", "-q").Output()
	if f := strings.Fields(string(ids)); len(f) > 0 {
		inspect, _ := exec.Command("docker", append([]string{"inspect"}, f...)...).Output()
		if bytes.Contains(inspect, []byte("s3cret-1")) {
			t.Error("a job's variable shows in docker inspect")
		}
	}
	s.waitJob("first", api.JobCompleted, 60*time.Second)

	second := imageJob("second", "prep", "azureml:busybox:1",
		`cat /cumulus-test-marker; echo "var=$MY_VAR dir=$PWD"; test -e /tmp/left-behind && echo SAW-THE-FIRST-JOB; echo two > "$CUMULUS_OUTPUT_DIR/r.txt"; exit 3`)
	second.Properties.EnvironmentVariables = map[string]string{"MY_VAR": "s3cret-2"}
	s.submitJob(second)
	j := s.waitJob("second", api.JobFailed, 60*time.Second)

	for name, want := range map[string]struct {
		v, out string
		code   int
	}{"first": {"s3cret-1", "one\n", 0}, "second": {"s3cret-2", "two\n", 3}} {
		log := s.jobLog(name)
		if !strings.Contains(log, "inside the test image") || !strings.Contains(log, "var="+want.v+" ") {
			t.Errorf("%s's log = %q, want the image's marker and its variable", name, log)
		}
		if !strings.Contains(log, "/jobs/prepared-") {
			t.Errorf("%s did not run in a prepared container: %q", name, log)
		}
		if got := outputFile(t, s, name, "r.txt"); got != want.out {
			t.Errorf("%s's output r.txt = %q, want %q", name, got, want.out)
		}
		if got := exitCodeOf(t, s.job(name)); got != want.code {
			t.Errorf("%s's exit code = %d, want %d", name, got, want.code)
		}
	}
	if strings.Contains(s.jobLog("second"), "SAW-THE-FIRST-JOB") {
		t.Error("the second job saw a file the first one left in its container")
	}
	if !strings.Contains(j.Properties.StatusMessage, "3") {
		t.Logf("status message: %s", j.Properties.StatusMessage)
	}
	waitFor(t, "the jobs' containers gone", 30*time.Second, func() bool { return len(s.jobContainers(true)) == 0 })
}

// Cancelling a job that runs in a prepared container kills it and removes
// its container.
func TestCancelJobInPreparedContainer(t *testing.T) {
	s, _ := warmImageNode(t, "prepc")
	s.submitJob(imageJob("cancel-prep", "prepc", "azureml:busybox:1", `echo "dir=$PWD host=$(hostname)"; echo started; sleep 300`))
	waitFor(t, "the job running", 30*time.Second, func() bool { return strings.Contains(s.jobLog("cancel-prep"), "started") })
	log := s.jobLog("cancel-prep")
	if !strings.Contains(log, "/jobs/prepared-") {
		t.Fatalf("the job did not run in a prepared container: %q", log)
	}
	host := strings.Fields(log[strings.Index(log, "host=")+len("host="):])[0]
	resp, err := s.c.CancelJob(bctx, "cancel-prep")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's container gone", 30*time.Second, func() bool {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+host).Output()
		return strings.TrimSpace(string(out)) == ""
	})
}

// Prepared containers do not outlive their agent: after kill -9 of the
// agent, they go (their launchers lose the agent's connection).
func TestPreparedContainersDieWithTheirAgent(t *testing.T) {
	s, node := warmImageNode(t, "prepk")
	pids := agents(s.dataDir)
	if len(pids) != 1 {
		t.Fatalf("%d agents, want 1", len(pids))
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the prepared containers to go with their agent", 30*time.Second, func() bool {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=cumulus.job-node="+node).Output()
		return strings.TrimSpace(string(out)) == ""
	})
}

// What a killed agent may leave of its prepared containers (one the engine
// was still making: made by hand here) is removed when an agent starts
// again on the same work dir, found by its label.
func TestLeftoverPreparedContainerRemovedAtAgentStart(t *testing.T) {
	s, node := warmImageNode(t, "prepl")
	pid, err := testbin.NodePID(s.dataDir, node)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(config.NodesDir(s.dataDir), node, "work")
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the prepared containers to go with their agent", 30*time.Second, func() bool { return len(preparedOf(node)) == 0 })
	// The server hears that the node's agent is gone and deletes the node,
	// its folder too: what the test leaves there must come after that, or
	// the deletion takes it away before the new agent can find it.
	waitFor(t, "the server to delete the node whose agent was killed", time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(config.NodesDir(s.dataDir), node))
		return os.IsNotExist(err)
	})

	left := filepath.Join(work, "jobs", "prepared-left")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "create", "--label", "cumulus.prepared="+work, "--label", "cumulus.job-node="+node, testImage, "true").Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })

	// An agent of the node's own on its work dir (the node's host is gone).
	agent := exec.Command(binary, "agent", "--server", "http://"+s.addr, "--node-id", node, "--work-dir", work, "--address", "127.0.0.1")
	agent.Env = append(strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00"), "CUMULUS_JOIN_TOKEN=none")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	})
	// The agent removes the container, then its directory: the container
	// can be gone (to docker ps) before the directory is.
	waitFor(t, "the leftover container and its directory removed", 30*time.Second, func() bool {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "id="+id).Output()
		_, err := os.Stat(left)
		return strings.TrimSpace(string(out)) == "" && os.IsNotExist(err)
	})
}
