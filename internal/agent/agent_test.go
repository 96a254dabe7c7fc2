package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/files"
)

// tarFiles lists a tar.gz's regular files with their contents.
func tarFiles(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("outputs are not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			c, _ := io.ReadAll(tr)
			out[h.Name] = string(c)
		}
	}
}

func TestJobRunsAndReports(t *testing.T) {
	t.Setenv("CUMULUS_JOIN_TOKEN", "must-not-leak")
	f := newFakeServer(t)
	ra := startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{
		UID: "job-1", Name: "hello", Attempt: 1, Grace: time.Second,
		Command: `echo to-stdout; echo to-stderr >&2; echo result > "$CUMULUS_OUTPUT_DIR/result.txt"; ` +
			`echo weights > "$AZUREML_OUTPUT_model/w.bin"; env > "$CUMULUS_OUTPUT_DIR/env.txt"`,
		Env:           map[string]string{"MY_VAR": "42"},
		Outputs:       []string{"model"},
		InstanceIndex: 1,
		NodeIPs:       []string{"10.0.0.1", "10.0.0.2"},
	}})
	ev := f.exited("job-1", 10*time.Second)
	if ev.ExitCode != 0 || ev.Reason != "" || ev.Attempt != 1 {
		t.Errorf("exited event = %+v; want exit 0, no reason, attempt 1", ev)
	}
	if ev.Started.IsZero() || ev.Ended.Before(ev.Started) {
		t.Errorf("exited event times: started %v ended %v", ev.Started, ev.Ended)
	}
	for _, e := range f.eventsOf("job-1") {
		if e.Started.IsZero() {
			t.Errorf("event %+v has no start time", e)
		}
	}
	if got := f.logOf("job-1"); got != "to-stdout\nto-stderr\n" {
		t.Errorf("log = %q; want stdout and stderr lines", got)
	}
	def := tarFiles(t, f.output("job-1", "default"))
	if def["result.txt"] != "result\n" {
		t.Errorf("default output = %v; want result.txt", keys(def))
	}
	if _, ok := def["model/w.bin"]; ok {
		t.Errorf("default output holds the named output model/: %v", keys(def))
	}
	if m := tarFiles(t, f.output("job-1", "model")); m["w.bin"] != "weights\n" {
		t.Errorf("model output = %v; want w.bin", keys(m))
	}
	env := def["env.txt"]
	for _, want := range []string{"MY_VAR=42", "CUMULUS_JOB_NAME=hello", "CUMULUS_JOB_UID=job-1", "CUMULUS_ATTEMPT=1",
		"CUMULUS_NODE_ID=node-1", "CUMULUS_NODE_RANK=1", "CUMULUS_NUM_NODES=2", "CUMULUS_NODE_IPS=10.0.0.1,10.0.0.2",
		"CUMULUS_OUTPUT_MODEL=", "AZUREML_OUTPUT_model="} {
		if !strings.Contains(env, want) {
			t.Errorf("job env lacks %s", want)
		}
	}
	if strings.Contains(env, "must-not-leak") {
		t.Error("the job saw the join token")
	}
	if strings.Contains(env, "CUDA_VISIBLE_DEVICES") {
		t.Error("CUDA_VISIBLE_DEVICES set on a node without GPUs")
	}
	// The identity is saved privately, and the job's state is marked reported.
	fi, err := os.Stat(filepath.Join(ra.cfg.WorkDir, "identity.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("identity.json: %v, mode %v; want 0600", err, fi.Mode())
	}
	f.waitFor(5*time.Second, "the job to leave the poll report", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.polls) > 0 && len(f.polls[len(f.polls)-1].Jobs) == 0
	})
	// The ended job's state names no process group for KillJobs to end.
	var saved savedJob
	if b, err := os.ReadFile(filepath.Join(ra.cfg.WorkDir, "jobs", "job-1", stateFile)); err != nil || json.Unmarshal(b, &saved) != nil {
		t.Fatalf("state.json: %v", err)
	}
	if saved.PGID != 0 || saved.State.Phase != agentapi.PhaseExited {
		t.Errorf("state after the job: process group %d, phase %s; want 0, exited", saved.PGID, saved.State.Phase)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// Outputs the job leaves empty are not uploaded: the exit report names
// them (the server files each as an empty upload), and the output the job
// wrote is uploaded as ever.
func TestEmptyOutputsRideOnTheExit(t *testing.T) {
	f := newFakeServer(t)
	startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{
		UID: "job-e", Name: "empty", Attempt: 1, Grace: time.Second,
		Command: `echo weights > "$AZUREML_OUTPUT_model/w.bin"`, Outputs: []string{"model", "metrics"},
	}})
	ev := f.exited("job-e", 10*time.Second)
	if ev.ExitCode != 0 {
		t.Fatalf("exited event = %+v", ev)
	}
	if got := strings.Join(ev.EmptyOutputs, ","); got != "metrics,default" {
		t.Errorf("exit report names %q as empty, want metrics,default", got)
	}
	for _, name := range []string{"metrics", "default"} {
		if b := f.output("job-e", name); b != nil {
			t.Errorf("empty output %s was uploaded (%d bytes)", name, len(b))
		}
	}
	if m := tarFiles(t, f.output("job-e", "model")); m["w.bin"] != "weights\n" {
		t.Errorf("model output = %v; want w.bin", keys(m))
	}
}

// A job that ends before ReportRunningAfter is reported once: its exit,
// which carries its start. One that runs on is reported running first.
func TestRunningIsReportedOnlyForJobsThatRunOn(t *testing.T) {
	f := newFakeServer(t)
	startAgent(t, f, func(c *Config) { c.ReportRunningAfter = time.Hour })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "short", Attempt: 1, Grace: time.Second, Command: "true"}})
	ev := f.exited("short", 10*time.Second)
	if evs := f.eventsOf("short"); len(evs) != 1 || ev.Started.IsZero() || ev.Ended.Before(ev.Started) {
		t.Errorf("a short job's events: %+v; want its exit alone, with its start", evs)
	}

	g := newFakeServer(t)
	startAgent(t, g, func(c *Config) { c.ReportRunningAfter = 10 * time.Millisecond })
	g.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "long", Attempt: 1, Grace: time.Second, Command: "sleep 600"}})
	g.waitFor(20*time.Second, "the long job's running event", func() bool { return len(g.eventsOf("long")) > 0 })
	if ev := g.eventsOf("long")[0]; ev.Phase != agentapi.PhaseRunning || ev.Started.IsZero() {
		t.Errorf("the long job's first event = %+v; want running, with its start", ev)
	}
	g.send(agentapi.PollResponse{Cancel: []string{"long"}})
	g.exited("long", 20*time.Second)
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "j", Attempt: 1, Command: "echo failing; exit 3"}})
	if ev := f.exited("j", 10*time.Second); ev.ExitCode != 3 {
		t.Errorf("exit code = %d; want 3", ev.ExitCode)
	}
	if got := f.logOf("j"); got != "failing\n" {
		t.Errorf("log = %q", got)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	start := time.Now()
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "slow", Attempt: 1, Command: "sleep 30",
		Timeout: 50 * time.Millisecond, Grace: 50 * time.Millisecond}})
	ev := f.exited("slow", 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the job took %s to stop; want about Timeout+Grace", took)
	}
	if want := "timeout: the job ran longer than 50ms"; ev.Reason != want {
		t.Errorf("reason = %q; want %q", ev.Reason, want)
	}
	if ev.ExitCode != 128+15 {
		t.Errorf("exit code = %d; want 143 (SIGTERM)", ev.ExitCode)
	}
}

func TestTimeoutKillsAfterGrace(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	// The shell ignores SIGTERM, and so does the sleep it starts.
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "stubborn", Attempt: 1,
		Command: "trap '' TERM; sleep 30; echo survived", Timeout: 50 * time.Millisecond, Grace: 100 * time.Millisecond}})
	ev := f.exited("stubborn", 10*time.Second)
	if ev.ExitCode != 128+9 || !strings.HasPrefix(ev.Reason, "timeout") {
		t.Errorf("event = %+v; want SIGKILL (137) and a timeout reason", ev)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "c", Attempt: 1, Command: "echo started; sleep 30", Grace: time.Second}})
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("c")) > 0 })
	f.waitFor(5*time.Second, "the job's first log line", func() bool { return f.logOf("c") == "started\n" })
	f.send(agentapi.PollResponse{Cancel: []string{"c"}})
	ev := f.exited("c", 10*time.Second)
	if ev.Reason != "canceled" || ev.ExitCode != 143 {
		t.Errorf("event = %+v; want reason canceled, exit 143", ev)
	}
}

// A rank stopped because its job failed on another node reports that
// reason, not "canceled".
func TestStopForTheServersReason(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "r0", Attempt: 1, Command: "sleep 30", Grace: time.Second}})
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("r0")) > 0 })
	why := "stopped because the job failed: exit code 2 on node n2 (node rank 1 of 2)"
	f.send(agentapi.PollResponse{Cancel: []string{"r0"}, StopReasons: map[string]string{"r0": why}})
	if ev := f.exited("r0", 10*time.Second); ev.Reason != why {
		t.Errorf("event = %+v; want the server's reason %q", ev, why)
	}
}

// The grace period is the program's, not the shell's: the shell that runs
// the command dies at SIGTERM at once, while the program it started takes
// a second to save a checkpoint; the agent waits for it (within the grace)
// instead of killing it when the shell is gone.
func TestStopGivesTheProgramItsGrace(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	program := `trap 'sleep 1; echo saved; exit 0' TERM; echo ready; while :; do sleep 0.05; done`
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "saver", Attempt: 1,
		Command: "sh -c \"" + program + "\"; echo the shell went on", Grace: 30 * time.Second}})
	f.waitFor(10*time.Second, "the program running", func() bool { return strings.Contains(f.logOf("saver"), "ready") })
	f.send(agentapi.PollResponse{Cancel: []string{"saver"}})
	ev := f.exited("saver", 20*time.Second)
	if got := f.logOf("saver"); !strings.Contains(got, "saved") || strings.Contains(got, "went on") {
		t.Errorf("log = %q; want the program's checkpoint line, and the shell stopped", got)
	}
	if ev.Reason != "canceled" {
		t.Errorf("event = %+v; want reason canceled", ev)
	}
}

func TestBusyNodeIgnoresSecondAssignment(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "first", Attempt: 1, Command: "sleep 0.5"}})
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("first")) > 0 })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "second", Attempt: 1, Command: "true"}})
	f.exited("first", 10*time.Second)
	if evs := f.eventsOf("second"); len(evs) != 0 {
		t.Errorf("the busy node ran a second job: %+v", evs)
	}
	// While it ran, polls reported the first job only.
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.polls {
		for _, j := range p.Jobs {
			if j.UID != "first" {
				t.Errorf("poll reported job %q", j.UID)
			}
		}
	}
}

func TestCodeBlob(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "pkg"), 0o755)
	os.WriteFile(filepath.Join(src, "pkg", "hello.txt"), []byte("hello from the snapshot\n"), 0o644)
	var buf bytes.Buffer
	if err := files.Pack(&buf, src); err != nil {
		t.Fatal(err)
	}
	sum := f.addBlob(buf.Bytes())
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.txt"), []byte("input data\n"), 0o644)
	buf.Reset()
	if err := files.Pack(&buf, data); err != nil {
		t.Fatal(err)
	}
	dataSum := f.addBlob(buf.Bytes())
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "code", Attempt: 1, CodeBlob: sum,
		Inputs: map[string]string{"training_data": dataSum}, Command: `cat pkg/hello.txt "$AZUREML_INPUT_training_data/d.txt"`}})
	if ev := f.exited("code", 10*time.Second); ev.ExitCode != 0 {
		t.Fatalf("event = %+v", ev)
	}
	if got := f.logOf("code"); got != "hello from the snapshot\ninput data\n" {
		t.Errorf("log = %q", got)
	}
}

func TestCodeBlobDigestMismatch(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	real := f.addBlob([]byte("not what was asked for"))
	wrong := strings.Repeat("ab", 32)
	f.mu.Lock()
	f.blobs[wrong] = f.blobs[real]
	f.mu.Unlock()
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "bad", Attempt: 1, CodeBlob: wrong, Command: "echo never"}})
	ev := f.exited("bad", 10*time.Second)
	if ev.ExitCode != exitNotRun || !strings.Contains(ev.Reason, "code download failed: sha256 mismatch") {
		t.Errorf("event = %+v; want a failed job with a sha256 mismatch reason", ev)
	}
	if got := f.logOf("bad"); got != "" {
		t.Errorf("the command ran: log %q", got)
	}
}

// TestLogShippingSurvivesOutage runs the agent on a fake clock: the test
// steps the log interval and the retry backoff itself, and the job waits
// at gates (a fifo) for the test, so every ship attempt happens at a known
// point of the outage and no step races the timer it is meant to fire.
func TestLogShippingSurvivesOutage(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	// Polls are held until the agent stops, and the agent is told so: its
	// poll loop never waits on the clock, only the job's shipping does.
	f.set(func(f *fakeServer) { f.pollTimeout, f.hold = time.Hour, -1 })
	// One fifo per gate: a second open of the first could succeed while
	// the job still holds it from its first read.
	dir := t.TempDir()
	gate1, gate2 := filepath.Join(dir, "gate1"), filepath.Join(dir, "gate2")
	for _, p := range []string{gate1, gate2} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "chatty", Attempt: 1, Env: map[string]string{"GATE1": gate1, "GATE2": gate2},
		Command: `i=1; while [ $i -le 40 ]; do echo "line $i"; case $i in 20) read go < "$GATE1";; 30) read go < "$GATE2";; esac; i=$((i+1)); done`}})
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	ra := startAgent(t, f, func(c *Config) { c.Clock = clk; c.ReportRunningAfter = -1 })
	interval := ra.cfg.LogInterval
	logRefused := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.logRefused }

	// Lines 1-20 are written; one tick ships them.
	g := reachGate(t, gate1)
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("chatty")) > 0 })
	blockUntil(t, clk, 1) // the shipping loop waits for its tick
	clk.Step(interval)
	f.waitFor(5*time.Second, "lines 1-20 shipped", func() bool { return strings.HasSuffix(f.logOf("chatty"), "line 20\n") })
	shipped := f.logOf("chatty")

	// The server goes away entirely: the tick's attempt to ship lines
	// 21-30 is refused.
	f.set(func(f *fakeServer) { f.down, f.logsDown = true, true })
	g.pass()
	g = reachGate(t, gate2)
	blockUntil(t, clk, 1)
	clk.Step(interval)
	f.waitFor(5*time.Second, "a log post refused while the server is down", func() bool { return logRefused() == 1 })

	// The server is back but its log endpoint is not: refused again.
	f.set(func(f *fakeServer) { f.down = false })
	blockUntil(t, clk, 1)
	clk.Step(interval)
	f.waitFor(5*time.Second, "a log post refused by the log endpoint", func() bool { return logRefused() == 2 })
	if got := f.logOf("chatty"); got != shipped {
		t.Fatalf("the server took log during the outage: %q", strings.TrimPrefix(got, shipped))
	}

	// The job writes lines 31-40 and ends; the final shipment is refused
	// too, and retried after its backoff, once the log endpoint is back.
	g.pass()
	f.waitFor(10*time.Second, "the final log post refused", func() bool { return logRefused() == 3 })
	blockUntil(t, clk, 2) // the retry's backoff, and the stopped loop's last tick
	f.set(func(f *fakeServer) { f.logsDown = false })
	clk.Step(ra.cfg.MaxBackoff)
	if ev := f.exited("chatty", 10*time.Second); ev.ExitCode != 0 {
		t.Fatalf("event = %+v", ev)
	}
	if got := f.logOf("chatty"); got != want.String() {
		t.Errorf("log after the outage:\n%q\nwant\n%q", got, want.String())
	}
	if n := logRefused(); n != 3 {
		t.Errorf("%d log posts refused; want the 3 the test caused", n)
	}
}

func TestGPUEnv(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, func(c *Config) {
		c.DetectGPUs = func(context.Context) ([]agentapi.GPU, error) {
			return []agentapi.GPU{{Index: 0, Name: "A"}, {Index: 1, Name: "A"}, {Index: 2, Name: "A"}, {Index: 3, Name: "A"}}, nil
		}
	})
	show := `echo "cuda=${CUDA_VISIBLE_DEVICES-unset} nvidia=${NVIDIA_VISIBLE_DEVICES-unset}"`
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "gpu", Attempt: 1, GPUs: []int{1, 3}, Command: show}})
	f.exited("gpu", 10*time.Second)
	if got := f.logOf("gpu"); got != "cuda=1,3 nvidia=1,3\n" {
		t.Errorf("GPU job saw %q", got)
	}
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "cpu", Attempt: 1, Command: show}})
	f.exited("cpu", 10*time.Second)
	if got := f.logOf("cpu"); got != "cuda= nvidia=unset\n" {
		t.Errorf("CPU job on a GPU node saw %q; want CUDA_VISIBLE_DEVICES empty", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registers != 1 {
		t.Errorf("registered %d times", f.registers)
	}
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "s", Attempt: 1, Command: "echo up; sleep 30", Grace: time.Second}})
	f.waitFor(10*time.Second, "the job's log", func() bool { return f.logOf("s") == "up\n" })
	f.send(agentapi.PollResponse{Shutdown: true})
	if err := ra.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run after Shutdown = %v; want nil", err)
	}
	ev := f.exited("s", time.Second)
	if ev.ExitCode != 143 || ev.Reason != "the node was shut down" {
		t.Errorf("event = %+v", ev)
	}
}

func TestStopWithContext(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "s", Attempt: 1, Command: "sleep 30", Grace: time.Second}})
	f.waitFor(10*time.Second, "running event", func() bool { return len(f.eventsOf("s")) > 0 })
	ra.cancel()
	if err := ra.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run after cancel = %v; want nil", err)
	}
	if ev := f.exited("s", time.Second); ev.Reason != "the node agent was stopped" {
		t.Errorf("event = %+v", ev)
	}
}

func TestUnknownNodeExits(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, nil)
	f.send(agentapi.PollResponse{Unknown: true})
	if err := ra.wait(t, 10*time.Second); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("Run = %v; want ErrUnknownNode", err)
	}
}

// TestRefusedNodeTokenExits: the server answers a poll of a node it does
// not know with 401, as it does a wrong token (so that node ids cannot be
// probed). An agent whose own node token is refused stops as for Unknown,
// and does not register again.
func TestRefusedNodeTokenExits(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, nil)
	f.waitFor(10*time.Second, "a first poll", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.polls) > 0
	})
	f.set(func(f *fakeServer) { f.nodeToken = "the node was removed" })
	if err := ra.wait(t, 10*time.Second); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("Run = %v; want ErrUnknownNode", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registers != 1 {
		t.Errorf("registered %d times; want 1 (no registering again after the node token is refused)", f.registers)
	}
}

func TestRegisterRefusedWithoutIdentity(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) { c.JoinToken = "wrong" })
	if err := ra.wait(t, 10*time.Second); err == nil || !strings.Contains(err.Error(), "join token") {
		t.Fatalf("Run = %v; want a refused join token", err)
	}
}

func TestRegisterRetriesAndRestartReusesIdentity(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	f.set(func(f *fakeServer) { f.regStatus = 503 })
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	ra := startAgent(t, f, func(c *Config) { c.WorkDir = dir; c.NodeID = "n7"; c.Clock = clk })
	refused := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.regRefused }
	// Each refusal is followed by a backoff on the agent's clock that
	// doubles; the agent tries again when, and only when, it has passed.
	for i, backoff := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		blockUntil(t, clk, 1)
		if n := refused(); n != i+1 {
			t.Fatalf("%d registrations refused before backoff %d; want %d", n, i+1, i+1)
		}
		clk.Step(backoff - time.Millisecond)
		if !stillWaiting(clk) {
			t.Fatalf("the agent's backoff %d was shorter than %s", i+1, backoff)
		}
		clk.Step(time.Millisecond)
		f.waitFor(5*time.Second, "the next registration", func() bool { return refused() == i+2 })
	}
	blockUntil(t, clk, 1)
	f.set(func(f *fakeServer) { f.regStatus = 0 })
	clk.Step(ra.cfg.MaxBackoff)
	// Its first poll comes after it saved the identity it registered with.
	f.waitFor(5*time.Second, "registration and a first poll", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.registers == 1 && len(f.polls) > 0
	})
	ra.cancel()
	if err := ra.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The join token was for one use: a restarted agent uses its identity
	// (the fake server accepts polls only with the node token).
	f.set(func(f *fakeServer) { f.joinToken = "rotated" })
	f.mu.Lock()
	before := len(f.polls)
	f.mu.Unlock()
	ra2 := startAgent(t, f, func(c *Config) { c.WorkDir = dir; c.NodeID = "n7"; c.JoinToken = "join-secret" })
	f.waitFor(5*time.Second, "polls of the restarted agent", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.polls) >= before+2 && f.polls[len(f.polls)-1].NodeID == "n7"
	})
	ra2.cancel()
	if err := ra2.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registers != 1 {
		t.Errorf("registered %d times; want 1", f.registers)
	}
}

func TestRestartReportsLostJob(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	dir := t.TempDir()
	// A previous agent process died while a job ran: its state says running.
	jobDir := filepath.Join(dir, "jobs", "lost")
	os.MkdirAll(jobDir, 0o755)
	os.WriteFile(filepath.Join(jobDir, logFile), []byte("partial\n"), 0o644)
	os.WriteFile(filepath.Join(jobDir, stateFile), []byte(`{"uid":"lost","attempt":2,"state":{"uid":"lost","attempt":2,"phase":"running"}}`), 0o600)
	startAgent(t, f, func(c *Config) { c.WorkDir = dir })
	ev := f.exited("lost", 10*time.Second)
	if ev.Attempt != 2 || ev.ExitCode != exitNotRun || !strings.HasPrefix(ev.Reason, "lost") {
		t.Errorf("event = %+v", ev)
	}
	if got := f.logOf("lost"); got != "partial\n" {
		t.Errorf("log = %q", got)
	}
}

func TestStopWhileServerDownReportsAtNextStart(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	dir := t.TempDir()
	ra := startAgent(t, f, func(c *Config) { c.WorkDir = dir; c.StopTimeout = 200 * time.Millisecond })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "d", Attempt: 1, Command: "echo hi; sleep 30", Grace: time.Second}})
	f.waitFor(10*time.Second, "the job's log", func() bool { return f.logOf("d") == "hi\n" })
	// The running report is sent beside the log, not before it.
	f.waitFor(10*time.Second, "the job's running report", func() bool { return len(f.eventsOf("d")) == 1 })
	f.set(func(f *fakeServer) { f.down = true })
	start := time.Now()
	ra.cancel()
	if err := ra.wait(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stopping took %s with the server down; want about StopTimeout", took)
	}
	if evs := f.eventsOf("d"); len(evs) != 1 {
		t.Fatalf("events while down: %+v; want only running", evs)
	}
	// The next agent process on this work dir delivers the exit.
	f.set(func(f *fakeServer) { f.down = false })
	startAgent(t, f, func(c *Config) { c.WorkDir = dir })
	ev := f.exited("d", 10*time.Second)
	if ev.ExitCode != 143 || ev.Reason != "the node agent was stopped" {
		t.Errorf("event = %+v", ev)
	}
}

// TestLimitsNeverFailAJob points the cgroup root at a plain folder that
// looks like cgroup v2: the limits are written, starting the job inside
// that "cgroup" fails, and the job runs without it.
func TestLimitsNeverFailAJob(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory\n"), 0o644)
	old := cgroupRoot
	cgroupRoot = root
	defer func() { cgroupRoot = old }()
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) { c.VCPUs, c.MemoryMB = 2, 512; c.NodeID = "lim" })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "limited", Attempt: 1, Command: "echo ok"}})
	if ev := f.exited("limited", 10*time.Second); ev.ExitCode != 0 {
		t.Fatalf("event = %+v", ev)
	}
	b, err := os.ReadFile(filepath.Join(root, "cumulus", "lim", "cpu.max"))
	if err != nil || string(b) != "200000 100000" {
		t.Errorf("the node's cpu.max = %q, %v", b, err)
	}
	ra.cancel()
	ra.wait(t, 5*time.Second)
}

// A job that ran in a prepared container has the container's directory,
// jobs/prepared-<n>, whose state.json names it: a restarted agent reports
// it from there, and removes what it left of containers no job took.
func TestRestartReportsLostJobInAPreparedDir(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	dir := t.TempDir()
	jobDir := filepath.Join(dir, "jobs", preparedPrefix+"123")
	os.MkdirAll(jobDir, 0o755)
	os.WriteFile(filepath.Join(jobDir, logFile), []byte("partial\n"), 0o644)
	os.WriteFile(filepath.Join(jobDir, stateFile), []byte(`{"uid":"lost-p","attempt":1,"state":{"uid":"lost-p","attempt":1,"phase":"running"}}`), 0o600)
	// Not taken by a job: no state.json.
	unused := filepath.Join(dir, "jobs", preparedPrefix+"456")
	os.MkdirAll(unused, 0o755)
	os.MkdirAll(filepath.Join(dir, launchDir, "456"), 0o700)
	// A job's own directory must carry its own uid.
	other := filepath.Join(dir, "jobs", "other")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, stateFile), []byte(`{"uid":"not-other","attempt":1,"state":{"phase":"running"}}`), 0o600)
	// A job's user owns its folder and may have renamed the log, which
	// holds what the job wrote, to state.json, naming another job: the
	// agent believes only the state file it made (mode 0600).
	forged := filepath.Join(dir, "jobs", preparedPrefix+"789")
	os.MkdirAll(forged, 0o755)
	os.WriteFile(filepath.Join(forged, stateFile), []byte(`{"uid":"victim","attempt":1,"state":{"uid":"victim","attempt":1,"phase":"exited"}}`), 0o644)

	startAgent(t, f, func(c *Config) { c.WorkDir = dir })
	ev := f.exited("lost-p", 10*time.Second)
	if ev.ExitCode != exitNotRun || !strings.HasPrefix(ev.Reason, "lost") {
		t.Errorf("event = %+v", ev)
	}
	if got := f.logOf("lost-p"); got != "partial\n" {
		t.Errorf("log = %q", got)
	}
	for _, d := range []string{unused, filepath.Join(dir, launchDir)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is left (%v)", d, err)
		}
	}
	if evs := f.eventsOf("not-other"); len(evs) != 0 {
		t.Errorf("a directory whose state names another job was reported: %+v", evs)
	}
	if evs := f.eventsOf("victim"); len(evs) != 0 {
		t.Errorf("a state the job's user put in the agent's place was reported: %+v", evs)
	}
}

// startLeftJob starts what an agent could leave behind: a process group
// whose leader carries the job's uid in its environment, as KillJobs
// requires. It returns once the child has exec'd with it (before, the
// child is a copy of the test's process); the group is killed at the end
// of the test.
func startLeftJob(t *testing.T, uid string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"CUMULUS_JOB_UID=" + uid}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	environ := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "environ")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(environ); strings.Contains(string(b), "CUMULUS_JOB_UID="+uid) {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never ran with the job's uid")
		}
	}
}

// KillJobs finds the uid of a job in a prepared container's directory in
// its state.json.
func TestKillJobsInAPreparedDir(t *testing.T) {
	dir := t.TempDir()
	jobDir := filepath.Join(dir, "jobs", preparedPrefix+"1")
	os.MkdirAll(jobDir, 0o755)
	cmd := startLeftJob(t, "u1")
	os.WriteFile(filepath.Join(jobDir, stateFile), fmt.Appendf(nil, `{"uid":"u1","attempt":1,"pgid":%d}`, cmd.Process.Pid), 0o600)
	if n := KillJobs(dir); n != 1 {
		t.Errorf("KillJobs = %d, want 1", n)
	}
	if st := waitState(cmd); st.Exited() {
		t.Errorf("the job's process was not killed: %v", st)
	}
}

// KillJobs reads only the files the agent made: the job's user owns the
// job's folder and could put there a state file (or a link to one) naming
// a process group it wants killed. The file of an agent of an earlier
// version (job.pgid) is still read, when it is the agent's own.
func TestKillJobsTrustsOnlyItsOwnFiles(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	start := func(uid string) (*exec.Cmd, string) {
		jobDir := filepath.Join(dir, "jobs", uid)
		os.MkdirAll(jobDir, 0o755)
		return startLeftJob(t, uid), jobDir
	}
	state := func(uid string, pgid int) []byte {
		return fmt.Appendf(nil, `{"uid":%q,"attempt":1,"state":{"phase":"running","started":"2026-01-01T00:00:00Z"},"pgid":%d}`, uid, pgid)
	}
	write := func(path string, b []byte, mode os.FileMode, owner int) {
		t.Helper()
		if err := os.WriteFile(path, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	me, nobody := os.Geteuid(), 65534

	// The agent's own state files name these two: both are ended.
	own, ownDir := start("own")
	write(filepath.Join(ownDir, stateFile), state("own", own.Process.Pid), 0o600, me)
	// A job an agent of an earlier version started: its group in job.pgid.
	old, oldDir := start("old")
	write(filepath.Join(oldDir, stateFile), state("old", 0), 0o600, me)
	write(filepath.Join(oldDir, oldPgidFile), []byte(strconv.Itoa(old.Process.Pid)+"\n"), 0o644, me)

	// What the job's user could have put in the agent's files' place.
	tries := map[string]*exec.Cmd{}
	c, d := start("foreign") // a state file of its own
	write(filepath.Join(d, stateFile), state("foreign", c.Process.Pid), 0o600, nobody)
	tries["a state file of another user"] = c
	c, d = start("log") // the agent's std.log, which holds what the job wrote, renamed
	write(filepath.Join(d, stateFile), state("log", c.Process.Pid), 0o644, me)
	tries["the job's log renamed"] = c
	c, d = start("linked")
	elsewhere := filepath.Join(t.TempDir(), "state.json")
	write(elsewhere, state("linked", c.Process.Pid), 0o600, me)
	if err := os.Symlink(elsewhere, filepath.Join(d, stateFile)); err != nil {
		t.Fatal(err)
	}
	tries["a symbolic link"] = c
	c, d = start("hard")
	write(filepath.Join(d, "mine"), state("hard", c.Process.Pid), 0o600, me)
	if err := os.Link(filepath.Join(d, "mine"), filepath.Join(d, stateFile)); err != nil {
		t.Fatal(err)
	}
	tries["a hard link"] = c
	c, d = start("old-foreign")
	write(filepath.Join(d, stateFile), state("old-foreign", 0), 0o600, me)
	write(filepath.Join(d, oldPgidFile), []byte(strconv.Itoa(c.Process.Pid)+"\n"), 0o644, nobody)
	tries["a job.pgid of another user"] = c
	c, d = start("ended") // this version's job, ended: its state names no group
	write(filepath.Join(d, stateFile), []byte(`{"uid":"ended","attempt":1,"state":{"phase":"exited","started":"2026-01-01T00:00:00Z"}}`), 0o600, me)
	write(filepath.Join(d, oldPgidFile), []byte(strconv.Itoa(c.Process.Pid)+"\n"), 0o644, me)
	tries["a job.pgid beside an ended job's state"] = c

	if n := KillJobs(dir); n != 2 {
		t.Errorf("KillJobs = %d, want 2 (the agents' own jobs alone)", n)
	}
	for name, c := range map[string]*exec.Cmd{"own": own, "old": old} {
		if st := waitState(c); st.Exited() {
			t.Errorf("the %s job was not killed: %v", name, st)
		}
	}
	if _, err := os.Stat(filepath.Join(oldDir, oldPgidFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the earlier agent's job.pgid is still there: %v", err)
	}
	for what, c := range tries {
		if !groupRuns(c.Process.Pid) {
			t.Errorf("the group named by %s was killed", what)
		}
	}
}

// KillJobs lets a job's init end its job its own way (on the agent's
// death signal it removes the job's container, which the engine would
// keep running) rather than killing it in the middle of that; a group
// that does not end is killed after leftJobsCleanup.
func TestKillJobsLetsTheInitCleanUp(t *testing.T) {
	defer func(d time.Duration) { leftJobsCleanup = d }(leftJobsCleanup)
	leftJobsCleanup = time.Second
	dir := t.TempDir()
	start := func(uid, script string) *exec.Cmd {
		jobDir := filepath.Join(dir, "jobs", uid)
		os.MkdirAll(jobDir, 0o755)
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = jobDir
		cmd.Env = []string{"CUMULUS_JOB_UID=" + uid, "PATH=" + os.Getenv("PATH")}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(filepath.Join(jobDir, "ready")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the job never set its signal handler")
			}
		}
		os.WriteFile(filepath.Join(jobDir, stateFile), fmt.Appendf(nil, `{"uid":%q,"attempt":1,"pgid":%d}`, uid, cmd.Process.Pid), 0o600)
		return cmd
	}
	// The cleanup takes a while, as a container's removal does, in a child.
	cleans := start("cleans", `trap 'sh -c "sleep 0.3; echo done > cleaned"; kill -9 0' USR1; touch ready; while :; do sleep 0.05; done`)
	stuck := start("stuck", `trap '' USR1; touch ready; while :; do sleep 0.05; done`)
	if n := KillJobs(dir); n != 2 {
		t.Errorf("KillJobs = %d, want 2", n)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "jobs", "cleans", "cleaned")); string(b) != "done\n" {
		t.Error("the job's init was killed before it cleaned up")
	}
	for _, c := range []*exec.Cmd{cleans, stuck} {
		waitState(c)
		deadline := time.Now().Add(5 * time.Second) // SIGKILL takes effect asynchronously
		for groupRuns(c.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if groupRuns(c.Process.Pid) {
			t.Errorf("a process of group %d outlived KillJobs", c.Process.Pid)
		}
	}
}

func waitState(cmd *exec.Cmd) *os.ProcessState {
	_ = cmd.Wait()
	return cmd.ProcessState
}
