package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// A job's environment is jobBaseEnv plus its own and the Cumulus ones:
// nothing of the agent's (a cloud secret, the join token).
func TestJobEnvIsMinimal(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sentinel-secret")
	t.Setenv("CUMULUS_JOIN_TOKEN", "must-not-leak")
	t.Setenv("TZ", "Europe/Paris")
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) { c.VCPUs = 3 })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{
		UID: "env-1", Name: "env", Attempt: 1, Grace: time.Second,
		Command: `env > "$CUMULUS_OUTPUT_DIR/env.txt"`,
		Env:     map[string]string{"MY_VAR": "42", "GOMAXPROCS": "5"},
	}})
	if ev := f.exited("env-1", 10*time.Second); ev.ExitCode != 0 {
		t.Fatalf("exited event = %+v", ev)
	}
	env := "\n" + tarFiles(t, f.output("env-1", "default"))["env.txt"]
	for _, bad := range []string{"sentinel-secret", "must-not-leak", "AWS_SECRET_ACCESS_KEY", "CUMULUS_JOIN_TOKEN", jobinit.EnvGoMaxProcs, "GOMAXPROCS=1"} {
		if strings.Contains(env, bad) {
			t.Errorf("job env holds %s:%s", bad, env)
		}
	}
	home := filepath.Join(ra.cfg.WorkDir, "jobs", "env-1")
	for _, want := range []string{"\nPATH=", "\nHOME=" + home + "\n", "\nLANG=", "\nTZ=Europe/Paris\n",
		"\nMY_VAR=42\n", "\nGOMAXPROCS=5\n", "\nCUMULUS_JOB_UID=env-1\n", "\nCUMULUS_VCPUS=3\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("job env lacks %q:%s", strings.TrimPrefix(want, "\n"), env)
		}
	}
}

func TestParseJobUser(t *testing.T) {
	for in, want := range map[string]string{"": "", "1234": "1234:1234", "1234:99": "1234:99", "0": "error", "x": "error", "12:y": "error"} {
		c, err := parseJobUser(in)
		got := ""
		switch {
		case err != nil:
			got = "error"
		case c != nil:
			got = strconv.Itoa(int(c.Uid)) + ":" + strconv.Itoa(int(c.Gid))
		}
		if got != want {
			t.Errorf("parseJobUser(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// fakeAgentEnv makes TestHelperFakeAgent act: it is a stand-in agent
// process that starts a job under the job init as the agent does, and is
// then killed with SIGKILL by TestJobDiesWithItsAgentProcess.
const fakeAgentEnv = "CUMULUS_TEST_FAKE_AGENT_DIR"

func TestHelperFakeAgent(t *testing.T) {
	dir := os.Getenv(fakeAgentEnv)
	if dir == "" {
		t.Skip("a helper process of TestJobDiesWithItsAgentProcess")
	}
	runtime.LockOSThread()
	j := &job{a: &agent{}, dir: dir}
	sh := exec.Command("/bin/sh", "-c", `sleep 300 & echo $! > pid.tmp; mv pid.tmp pid; wait`)
	sh.Dir = dir
	cmd, err := j.initCommand(sh, false, true)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr.Setpgid = true
	if err := startInit(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Fatal("the job ended while its agent lived")
}

// The job init kills the job's process group when its agent dies, even by
// SIGKILL: a grandchild of the init (sleep, started in the background)
// is gone at once.
func TestJobDiesWithItsAgentProcess(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperFakeAgent$")
	helper.Env = append(os.Environ(), fakeAgentEnv+"="+dir)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = helper.Process.Kill(); _ = helper.Wait() }()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	for deadline := time.Now().Add(5 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the job's process outlived its agent by 5s")
		}
	}
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+1:]), " Z")
}
