package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"

	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// testImage is the node image these tests build from a static cumulus.
const testImage = "cumulus-node:test"

// skipReason is why the tests skip (no Docker engine here); "" when they run.
var skipReason string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	ctx := context.Background()
	ictx, icancel := context.WithTimeout(ctx, time.Minute) // a stuck engine hangs here
	defer icancel()
	if out, err := exec.CommandContext(ictx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		reason := fmt.Sprintf("no usable Docker engine: docker info: %v: %s", err, bytes.TrimSpace(out))
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "FAIL: the docker provider tests need Docker in CI:", reason)
			return 1
		}
		fmt.Fprintln(os.Stderr, "skipping the docker provider tests:", reason)
		skipReason = reason
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "cumulus-docker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// No deadline around the builds: on a cold cache they take minutes, and
	// go test's own -timeout still ends a real hang.
	start := time.Now()
	bin, _, err := testbin.Cumulus(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	built := time.Now()
	if err := nodeimage.Build(ctx, testImage, bin, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "static cumulus built in %s, node image %s in %s\n",
		built.Sub(start).Round(time.Millisecond), testImage, time.Since(built).Round(time.Millisecond))
	code := m.Run()
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if out, err := exec.CommandContext(rctx, "docker", "image", "rm", testImage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "remove %s: %v: %s\n", testImage, err, out)
	}
	return code
}

func requireDocker(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// registered waits for the node's agent to register and returns the join
// token it used.
func registered(t *testing.T, s *providertest.StubServer, node string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if tok := s.JoinToken(node); tok != "" {
			return tok
		}
	}
	t.Fatalf("node %s did not register within 30s; its log:\n%s", node, dockerOut(t, "logs", ContainerName(node)))
	return ""
}

func newTestProvider(t *testing.T) *Provider {
	requireDocker(t)
	return New(Options{
		Image:     testImage,
		BaseDir:   t.TempDir(),
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		StopGrace: 5 * time.Second,
	})
}

// cleanup deletes nodes at the end of a test, whatever happened.
func cleanup(t *testing.T, p *Provider, ids ...string) {
	t.Cleanup(func() {
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := p.Delete(ctx, id); err != nil {
				t.Errorf("cleanup: Delete(%s) = %v", id, err)
			}
			cancel()
		}
	})
}

func TestConformance(t *testing.T) {
	requireDocker(t)
	srv := providertest.NewStubServer(t)
	providertest.Run(t,
		func(t *testing.T) provider.Provider { return newTestProvider(t) },
		func(id string) provider.NodeSpec {
			return provider.NodeSpec{NodeID: id, ComputeID: "c1", VCPUs: 1, MemoryGB: 0.5, ServerURL: srv.URL, JoinToken: "join"}
		})
}

// inspected is the part of docker inspect the tests look at.
type inspected struct {
	ID    string `json:"Id"`
	Path  string
	Args  []string
	State struct {
		Running  bool
		ExitCode int
	}
	Config struct {
		Labels      map[string]string
		Env         []string
		StopTimeout *int
	}
	HostConfig struct {
		NetworkMode   string
		NanoCpus      int64
		Memory        int64
		Init          *bool
		RestartPolicy struct{ Name string }
	}
	Mounts []struct {
		Source      string
		Destination string
		RW          bool
	}
}

func inspect(t *testing.T, name string) inspected {
	t.Helper()
	var c inspected
	if err := json.Unmarshal(dockerOut(t, "container", "inspect", "--format", "{{json .}}", name), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func dockerOut(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return bytes.TrimSpace(out)
}

type hostFacts struct {
	NCPU     int
	MemTotal int64
}

func host(t *testing.T) hostFacts {
	var h hostFacts
	if err := json.Unmarshal(dockerOut(t, "info", "--format", "{{json .}}"), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNodeContainer(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	h := host(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a real CA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "join-secret-5f1c2a"
	big := provider.NodeSpec{NodeID: "dtest-big", ComputeID: "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/w/computes/gpu",
		VMSize: "Standard_NC24s_v3", VCPUs: h.NCPU + 22, MemoryGB: float64(h.MemTotal>>30) + 400, GPUs: 4, LowPriority: true,
		ServerURL: srv.URL, JoinToken: secret}
	small := provider.NodeSpec{NodeID: "dtest-small", ComputeID: "cpu", VMSize: "Standard_DS1_v2", VCPUs: 1, MemoryGB: 0.75,
		ServerURL: srv.URL, CAFile: ca, JoinToken: secret + "-2"}
	cleanup(t, p, big.NodeID, small.NodeID)
	for _, s := range []provider.NodeSpec{big, small} {
		if _, err := p.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// The agent got the join token, through the environment.
	if got := registered(t, srv, big.NodeID); got != secret {
		t.Errorf("agent registered with join token %q; want %q", got, secret)
	}

	c := inspect(t, ContainerName(big.NodeID))
	want := map[string]string{LabelNode: big.NodeID, LabelCompute: big.ComputeID, LabelOwner: p.o.Owner, LabelVMSize: big.VMSize,
		LabelVCPUs: fmt.Sprint(big.VCPUs), LabelMemoryMB: fmt.Sprint(int(big.MemoryGB * 1024)), LabelGPUs: "4", LabelLowPriority: "true"}
	for k, v := range want {
		if c.Config.Labels[k] != v {
			t.Errorf("label %s = %q; want %q", k, c.Config.Labels[k], v)
		}
	}
	if c.HostConfig.NanoCpus != int64(h.NCPU)*1e9 {
		t.Errorf("CPU limit %d nano-CPUs; want the host's %d CPUs (the size asks for more)", c.HostConfig.NanoCpus, h.NCPU)
	}
	if c.HostConfig.Memory != h.MemTotal>>20<<20 {
		t.Errorf("memory limit %d; want the host's %d (the size asks for more)", c.HostConfig.Memory, h.MemTotal>>20<<20)
	}
	if c.HostConfig.NetworkMode != "host" {
		t.Errorf("network mode %q; want host", c.HostConfig.NetworkMode)
	}
	if c.HostConfig.RestartPolicy.Name != "no" {
		t.Errorf("restart policy %q; want no", c.HostConfig.RestartPolicy.Name)
	}
	if c.HostConfig.Init == nil || !*c.HostConfig.Init {
		t.Error("no init process in the node container")
	}
	if c.Config.StopTimeout == nil || *c.Config.StopTimeout != 5 {
		t.Errorf("stop timeout %v; want the stop grace, 5 s", c.Config.StopTimeout)
	}
	mounts := map[string]string{}
	for _, m := range c.Mounts {
		mounts[m.Destination] = m.Source
	}
	if mounts["/var/run/docker.sock"] != nodeimage.DockerSocket() {
		t.Errorf("docker socket mount: %v", c.Mounts)
	}
	dir := filepath.Join(p.o.BaseDir, big.NodeID)
	if mounts[dir] != dir {
		t.Errorf("node folder %s not mounted at the same path: %v", dir, c.Mounts)
	}
	if !contains(c.Args, "--work-dir", filepath.Join(dir, "work")) || !contains(c.Args, "--node-id", big.NodeID) {
		t.Errorf("agent args %q", c.Args)
	}
	if strings.Contains(c.Path+strings.Join(c.Args, " "), secret) {
		t.Errorf("the join token is in the container's command: %s %q", c.Path, c.Args)
	}
	if !containsEnv(c.Config.Env, "CUMULUS_JOIN_TOKEN="+secret) || !containsEnv(c.Config.Env, fmt.Sprintf("CUMULUS_VCPUS=%d", big.VCPUs)) ||
		!containsEnv(c.Config.Env, "CUMULUS_GPUS=4") {
		t.Errorf("container env %q", c.Config.Env)
	}
	// No process on this machine shows the token on its command line.
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the join token: %q", f, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}

	c = inspect(t, ContainerName(small.NodeID))
	if c.HostConfig.NanoCpus != 1e9 || c.HostConfig.Memory != 768<<20 {
		t.Errorf("small node limits: %d nano-CPUs, %d bytes; want 1 CPU, 768 MiB", c.HostConfig.NanoCpus, c.HostConfig.Memory)
	}
	if !contains(c.Args, "--ca-file", ca) {
		t.Errorf("agent args %q lack --ca-file %s", c.Args, ca)
	}
	ro := false
	for _, m := range c.Mounts {
		ro = ro || m.Destination == ca && m.Source == ca && !m.RW
	}
	if !ro {
		t.Errorf("CA file not mounted read-only: %+v", c.Mounts)
	}
}

func contains(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

func containsEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

func TestDeleteRemovesJobContainers(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	id := "dtest-jobs"
	cleanup(t, p, id)
	if _, err := p.Create(ctx, provider.NodeSpec{NodeID: id, VCPUs: 1, MemoryGB: 0.5, ServerURL: srv.URL, JoinToken: "j"}); err != nil {
		t.Fatal(err)
	}
	// A job container as the node's agent would start it, one running and
	// one exited.
	running := string(dockerOut(t, "run", "-d", "--label", LabelJobNode+"="+id, "--entrypoint", "/bin/sleep", testImage, "300"))
	exited := string(dockerOut(t, "run", "-d", "--label", LabelJobNode+"="+id, "--entrypoint", "/bin/true", testImage))
	other := string(dockerOut(t, "run", "-d", "--label", LabelJobNode+"=another-node", "--entrypoint", "/bin/sleep", testImage, "300"))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", running, exited, other).Run() })
	dir := filepath.Join(p.o.BaseDir, id)
	// A file in the node folder, as jobs leave there.
	if err := os.WriteFile(filepath.Join(dir, "work", "out.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{ContainerName(id), running, exited} {
		if out, err := exec.Command("docker", "container", "inspect", c).CombinedOutput(); err == nil || !strings.Contains(string(out), "No such") {
			t.Errorf("container %s outlived Delete: %v %s", c, err, out)
		}
	}
	if !inspect(t, other).State.Running {
		t.Error("Delete removed another node's job container")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("node folder left: %v", err)
	}
}

func TestKilledAndStoppedNodes(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	killed, stopped := "dtest-killed", "dtest-stopped"
	cleanup(t, p, killed, stopped)
	for _, id := range []string{killed, stopped} {
		if _, err := p.Create(ctx, provider.NodeSpec{NodeID: id, VCPUs: 1, MemoryGB: 0.5, ServerURL: srv.URL, JoinToken: "j"}); err != nil {
			t.Fatal(err)
		}
		registered(t, srv, id)
	}
	dockerOut(t, "kill", ContainerName(killed))
	// docker stop with the container's own timeout: the agent gets SIGTERM
	// (through the init process) and exits 0 well before the SIGKILL.
	start := time.Now()
	dockerOut(t, "stop", ContainerName(stopped))
	if took := time.Since(start); took >= p.o.StopGrace {
		t.Errorf("docker stop took %s: the agent did not exit on SIGTERM", took)
	}
	if c := inspect(t, ContainerName(stopped)); c.State.ExitCode != 0 {
		t.Errorf("stopped node exited %d; want 0 (the agent stops on SIGTERM)", c.State.ExitCode)
	}
	ins, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 2 || ins[0].NodeID != killed || ins[0].Running || ins[1].NodeID != stopped || ins[1].Running {
		t.Errorf("List = %+v; want both nodes, neither running", ins)
	}
	// Create of a node whose container is there (dead) is idempotent; the
	// control plane deletes such nodes.
	if id, err := p.Create(ctx, provider.NodeSpec{NodeID: killed, ServerURL: srv.URL}); err != nil || id != ins[0].ProviderID {
		t.Errorf("Create of the killed node = %q, %v; want its container %q", id, err, ins[0].ProviderID)
	}
	for _, id := range []string{killed, stopped} {
		if err := p.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if ins, _ := p.List(ctx); len(ins) != 0 {
		t.Errorf("List after Delete = %+v", ins)
	}
}

// A control plane restarted on the same data dir finds its nodes by label;
// another control plane on the same engine does not see them.
func TestListAfterRestartSeesOnlyOwnNodes(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	id := "dtest-restart"
	cleanup(t, p, id)
	cid, err := p.Create(ctx, provider.NodeSpec{NodeID: id, VCPUs: 1, MemoryGB: 0.5, ServerURL: srv.URL, JoinToken: "j"})
	if err != nil {
		t.Fatal(err)
	}
	again := New(Options{Image: testImage, BaseDir: p.o.BaseDir})
	ins, err := again.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].NodeID != id || ins[0].ProviderID != cid || !ins[0].Running {
		t.Errorf("List after a restart = %+v; want %s running as %s", ins, id, cid)
	}
	other := New(Options{Image: testImage, BaseDir: t.TempDir()})
	if ins, err := other.List(ctx); err != nil || len(ins) != 0 {
		t.Errorf("another control plane's List = %+v, %v; want none", ins, err)
	}
}

func TestCreateWithoutImageSaysHowToBuildIt(t *testing.T) {
	requireDocker(t)
	p := New(Options{Image: "cumulus-node:never-built", BaseDir: t.TempDir()})
	_, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "dtest-noimage", ServerURL: "http://127.0.0.1:1"})
	if !provider.IsConfiguration(err) || !strings.Contains(err.Error(), "cumulus node-image build") {
		t.Errorf("Create with a missing image = %v; want a configuration error with a hint to build it", err)
	}
	if out, err := exec.Command("docker", "container", "inspect", ContainerName("dtest-noimage")).CombinedOutput(); err == nil {
		t.Errorf("a container was left behind: %s", out)
	}
}
