package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// testImage is a tiny image built here without a registry: Debian's static
// busybox imported with `docker import`, plus a marker file.
const testImage = "cumulus-test/busybox:1"

var (
	dockerOnce sync.Once
	dockerErr  error
)

// requireDocker builds the test image, or skips when no Docker engine runs
// here — except in CI, where a missing engine is a failure.
func requireDocker(t *testing.T) {
	t.Helper()
	dockerOnce.Do(func() { dockerErr = buildTestImage() })
	if dockerErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("docker is required in CI: %v", dockerErr)
	}
	t.Skipf("skipping: no usable Docker engine here (%v)", dockerErr)
}

func buildTestImage() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("docker info: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", testImage).Run() == nil {
		return nil
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is needed to build the test image: %w", err)
	}
	root, err := os.MkdirTemp("", "cumulus-rootfs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		return err
	}
	for _, app := range []string{"sh", "echo", "cat", "sleep", "ls", "wc", "hostname", "env", "true", "false"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", app)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cumulus-test-marker"), []byte("inside the test image\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", "tar -C "+root+" -c . | docker import - "+testImage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker import: %v: %s", err, out)
	}
	return nil
}

func (s *server) createEnvironment(name, version, image string) {
	s.t.Helper()
	if _, err := s.c.PutEnvironment(bctx, name, version, api.Environment{Properties: api.EnvironmentProperties{Image: image}}); err != nil {
		s.t.Fatal(err)
	}
}

func imageJob(name, compute, env, command string) api.Job {
	return api.Job{Name: name, Properties: api.JobProperties{Command: command, ComputeID: compute, EnvironmentID: env}}
}

// A job whose environment names an image runs inside a container of it on
// a local-provider node: its files, variables and outputs flow as for a
// process, and the container is gone afterwards.
func TestJobRunsInItsImage(t *testing.T) {
	requireDocker(t)
	s := startServer(t)
	s.createCompute("imgc", 0, 1, "PT30S")
	s.createEnvironment("busybox", "1", testImage)
	s.submitJob(imageJob("in-image", "imgc", "azureml:busybox:1",
		`cat /cumulus-test-marker; echo "rank=$CUMULUS_NODE_RANK attempt=$CUMULUS_ATTEMPT"; echo result > "$CUMULUS_OUTPUT_DIR/r.txt"`))
	j := s.waitJob("in-image", api.JobCompleted, 60*time.Second)
	if j.Properties.Image != testImage {
		t.Fatalf("job image = %q, want it resolved from the environment", j.Properties.Image)
	}
	log := s.jobLog("in-image")
	if !strings.Contains(log, "inside the test image") || !strings.Contains(log, "rank=0 attempt=1") {
		t.Fatalf("log = %q, want the image's marker file and the job's variables", log)
	}
	var buf strings.Builder
	if err := s.c.JobOutput(bctx, "in-image", "default", &buf); err != nil || buf.Len() == 0 {
		t.Fatalf("no outputs from the container: %v", err)
	}
	if ids := s.jobContainers(true); len(ids) > 0 {
		t.Fatalf("job containers left behind: %s", ids)
	}
	// An image that is not here and cannot be pulled fails the job quickly
	// with a clear reason (a loopback registry that refuses: no traffic leaves the machine).
	s.submitJob(imageJob("no-image", "imgc", "image:127.0.0.1:1/nosuch:1", "true"))
	j = s.waitJob("no-image", api.JobFailed, 60*time.Second)
	if !strings.Contains(j.Properties.StatusMessage, "image 127.0.0.1:1/nosuch:1 not found locally and could not be pulled") {
		t.Fatalf("status message %q does not say the image is missing", j.Properties.StatusMessage)
	}
	// Cancel stops the container.
	s.submitJob(imageJob("cancel-me", "imgc", "image:"+testImage, "echo started; sleep 300"))
	waitFor(t, "the container job running", 30*time.Second, func() bool {
		return strings.Contains(s.jobLog("cancel-me"), "started")
	})
	resp, err := s.c.CancelJob(bctx, "cancel-me")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's container gone", 30*time.Second, func() bool { return len(s.jobContainers(true)) == 0 })
	// A missing environment is refused at submit.
	if _, err := s.c.PutJob(bctx, imageJob("bad-env", "imgc", "azureml:nosuch:1", "true")); err == nil {
		t.Fatal("a job naming a missing environment was accepted")
	}
}

// A job's container does not outlive its agent: after kill -9 of the agent
// the container is removed (the engine would keep it running otherwise),
// so the job never runs twice at the same time.
func TestImageJobContainerDiesWithItsAgent(t *testing.T) {
	requireDocker(t)
	s := startServer(t)
	s.createCompute("imgk", 0, 1, "PT30S")
	s.submitJob(imageJob("orphan", "imgk", "image:"+testImage, "echo started; sleep 300"))
	waitFor(t, "the container job running", 30*time.Second, func() bool {
		return strings.Contains(s.jobLog("orphan"), "started")
	})
	node := s.nodeOf("orphan", 0)
	running := func() bool {
		out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=cumulus.job-node="+node).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	if !running() {
		t.Fatal("no container runs the job")
	}
	pids := agents(s.dataDir)
	if len(pids) != 1 {
		t.Fatalf("%d agents, want 1", len(pids))
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for running() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling the engine
	}
	if running() {
		out, _ := exec.Command("docker", "ps", "--filter", "label=cumulus.job-node="+node, "--format", "{{.Names}} {{.Status}} {{.Command}}").CombinedOutput()
		t.Fatalf("the job's container outlived its agent by 30 s:\n%s", out)
	}
}

// Two ranks in containers (host networking) rendezvous over TCP.
func TestTwoRanksInContainersRendezvous(t *testing.T) {
	requireDocker(t)
	bin := buildStaticRendezvous(t)
	s := startServer(t)
	s.createCompute("imgdist", 0, 2, "PT30S")
	code := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "rendezvous"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "job.yml"), fmt.Sprintf(`command: ./rendezvous
code: %s
environment: {image: %s}
compute: imgdist
resources: {instance_count: 2}
distribution: {type: pytorch}
name: torch-in-image
`, code, testImage))
	if _, errOut, rc := s.cli(dir, "job", "create", "--file", "job.yml"); rc != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	s.waitJob("torch-in-image", api.JobCompleted, 60*time.Second)
	if got := s.rankLog("torch-in-image", 0); !strings.Contains(got, "rank 0 of 2: sum=1") {
		t.Fatalf("rank 0 log = %q", got)
	}
}

func buildStaticRendezvous(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rendezvous")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/rendezvous")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build rendezvous: %v\n%s", err, out)
	}
	return bin
}
