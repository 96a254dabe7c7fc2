package local

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/procstat"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"

	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// cumulusBin is the real binary, built once for the agents.
var cumulusBin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "cumulus-local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(tmp)
		var err error
		cumulusBin, _, err = testbin.Cumulus(tmp)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func newTestProvider(t *testing.T) *Provider { return newTestProviderWith(t, Options{}) }

// newTestProviderWith is a provider of the test's agent binary with o's
// other settings.
func newTestProviderWith(t *testing.T, o Options) *Provider {
	o.BaseDir = t.TempDir()
	o.AgentCommand = []string{cumulusBin, "agent", "--log-level", "debug"}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.StopGrace = 5 * time.Second
	return New(o)
}

func TestConformance(t *testing.T) {
	srv := providertest.NewStubServer(t)
	for name, o := range map[string]Options{"node host": {}, "process per node": {ProcessPerNode: true}} {
		t.Run(name, func(t *testing.T) {
			providertest.Run(t,
				func(t *testing.T) provider.Provider { return newTestProviderWith(t, o) },
				func(id string) provider.NodeSpec {
					return provider.NodeSpec{NodeID: id, VCPUs: 2, MemoryGB: 4, ServerURL: srv.URL, JoinToken: "join"}
				})
		})
	}
}

func spec(srv *providertest.StubServer, id string) provider.NodeSpec {
	return provider.NodeSpec{NodeID: id, VCPUs: 2, MemoryGB: 1.5, GPUs: 1, ServerURL: srv.URL, JoinToken: "join-secret"}
}

// alive reports whether a process group has members that are not zombies
// (orphaned zombies wait for init, which may take a while to reap them).
func alive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:])) // state ppid pgrp ...
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// gone waits a little for a process group to empty.
func gone(pgid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for alive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func jobPgid(t *testing.T, p *Provider, node, uid string) int {
	t.Helper()
	path := filepath.Join(p.o.BaseDir, node, workDir, "jobs", uid, "state.json")
	var saved struct {
		PGID int `json:"pgid"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil || saved.PGID <= 1 {
		t.Fatalf("the running job's process group in its state.json: %d, %v", saved.PGID, err)
	}
	return saved.PGID
}

func TestDeleteStopsTheRunningJob(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, spec(srv, "n1")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(ctx, "n1") })
	srv.Assign <- agentapi.Assignment{UID: "j1", Attempt: 1, Command: "echo $CUMULUS_VCPUS $CUMULUS_MEMORY_MB; sleep 30", Grace: 2 * time.Second}
	if ev := srv.Event(t); ev.Phase != agentapi.PhaseRunning {
		t.Fatalf("first event = %+v", ev)
	}
	pgid := jobPgid(t, p, "n1", "j1")
	var log []byte
	for deadline := time.Now().Add(5 * time.Second); len(log) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		log, _ = os.ReadFile(filepath.Join(p.o.BaseDir, "n1", workDir, "jobs", "j1", "std.log"))
	}
	// The agent's command line does not carry the join token.
	pid, _ := p.running("n1")
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if strings.Contains(string(cmdline), "join-secret") {
		t.Error("the join token is on the agent's command line")
	}
	if err := p.Delete(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	ev := srv.Event(t)
	if ev.Phase != agentapi.PhaseExited || ev.Reason != "the node agent was stopped" || ev.ExitCode != 143 {
		t.Errorf("exit event = %+v; want the job stopped by SIGTERM", ev)
	}
	if !gone(pgid) {
		t.Error("the job's process group outlived Delete")
	}
	if got := strings.TrimSpace(string(log)); got != "2 1536" {
		t.Errorf("job saw CUMULUS_VCPUS CUMULUS_MEMORY_MB = %q; want 2 1536", got)
	}
	if _, err := os.Stat(filepath.Join(p.o.BaseDir, "n1")); !os.IsNotExist(err) {
		t.Errorf("node folder left: %v", err)
	}
}

// TestJobDiesWithItsAgent: an agent killed with SIGKILL takes its job
// with it (the job's supervisor gets the agent's parent-death signal), and
// Delete of the dead node still succeeds.
func TestJobDiesWithItsAgent(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, spec(srv, "n2")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(ctx, "n2") })
	srv.Assign <- agentapi.Assignment{UID: "j2", Attempt: 1, Command: "sleep 30 & sleep 30"}
	srv.Event(t)
	pgid := jobPgid(t, p, "n2", "j2")
	pid, ok := p.running("n2")
	if !ok {
		t.Fatal("agent not running")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !gone(pgid) {
		t.Fatal("the job outlived its agent")
	}
	// SIGKILL is asynchronous: the job's parent-death signal comes from
	// the thread that started it, so the job can be gone while the rest of
	// the agent (a node host: the node's lock with it) is still exiting.
	// List must say so once the process has ended, however long that takes.
	var ins []provider.Instance
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ins, _ = p.List(ctx)
		if len(ins) == 1 && !ins[0].Running || time.Now().After(deadline) {
			break
		}
	}
	if len(ins) != 1 || ins[0].Running {
		t.Errorf("List after the agent died = %+v; want n2 not running", ins)
	}
	if err := p.Delete(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
}

// TestNodesRunJobsAsUsersOfTheirOwn: with isolation (root), each node's
// jobs run as a user of their own, which cannot read the agent's identity.
func TestNodesRunJobsAsUsersOfTheirOwn(t *testing.T) {
	p := newTestProvider(t)
	if ok, why := p.Isolation(); !ok {
		t.Skip(why)
	}
	srv := providertest.NewStubServer(t)
	ctx := context.Background()
	uids := map[string]string{}
	for _, n := range []string{"u1", "u2"} {
		if _, err := p.Create(ctx, spec(srv, n)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(ctx, n) })
		b, err := os.ReadFile(filepath.Join(p.o.BaseDir, n, uidFile))
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = strings.TrimSpace(string(b))
	}
	if uids["u1"] == uids["u2"] {
		t.Fatalf("both nodes run jobs as uid %s", uids["u1"])
	}
	srv.Assign <- agentapi.Assignment{UID: "who", Attempt: 1,
		Command: `id -u; cat ../../identity.json > /dev/null 2>&1 && echo IDENTITY-READ; echo done`}
	ev := srv.Event(t)
	for ev.Phase == agentapi.PhaseRunning { // a short job may be reported by its exit alone
		ev = srv.Event(t)
	}
	if ev.Phase != agentapi.PhaseExited || ev.ExitCode != 0 {
		t.Fatalf("exit event = %+v", ev)
	}
	var log []byte
	for _, n := range []string{"u1", "u2"} {
		if b, err := os.ReadFile(filepath.Join(p.o.BaseDir, n, workDir, "jobs", "who", "std.log")); err == nil {
			log = b
			if got := strings.Fields(string(b)); len(got) == 0 || got[0] != uids[n] {
				t.Errorf("job on %s ran as uid %v; want %s", n, got, uids[n])
			}
		}
	}
	if len(log) == 0 || strings.Contains(string(log), "IDENTITY-READ") || !strings.Contains(string(log), "done") {
		t.Errorf("job log = %q; want its uid and done, and the identity unread", log)
	}
}

// The nodes of a compute share one agent process (a node host); another
// compute's nodes have theirs. Killing a host is the end of each of its
// nodes: each is reported gone, and is no longer running; the other
// compute's node runs on. A node of the dead host can be deleted, and a
// new node of that compute gets a new host.
// mustRun is the pid of the process that runs a node just created; a node
// that does not run fails the test with what tells why: its pid file,
// that pid's command line and its agent's log.
func mustRun(t *testing.T, p *Provider, id string) int {
	t.Helper()
	pid, ok := p.running(id)
	if !ok {
		log, _ := os.ReadFile(filepath.Join(p.o.BaseDir, id, logFile))
		pidf, _ := os.ReadFile(filepath.Join(p.o.BaseDir, id, pidFile))
		cmdline, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pidf)) + "/cmdline")
		t.Fatalf("%s does not run just after its Create; pid file %q, that pid's command line %q; agent log:\n%s", id, pidf, cmdline, log)
	}
	return pid
}

func TestNodesOfAComputeShareAHost(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mk := func(id, compute string) {
		t.Helper()
		sp := spec(srv, id)
		sp.ComputeID = compute
		if _, err := p.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(context.Background(), id) })
	}
	mk("a1", "ca")
	mk("a2", "ca")
	mk("b1", "cb")
	pids := map[string]int{}
	for _, id := range []string{"a1", "a2", "b1"} {
		pids[id] = mustRun(t, p, id)
	}
	if pids["a1"] != pids["a2"] || pids["a1"] == pids["b1"] {
		t.Fatalf("agent processes %v: want a1 and a2 in one, b1 in another", pids)
	}
	events := make(chan provider.Event, 10)
	go p.Watch(ctx, func(ev provider.Event) { events <- ev })
	if err := syscall.Kill(pids["a1"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for len(gone) < 2 {
		select {
		case ev := <-events:
			if ev.Kind != provider.EventGone || (ev.NodeID != "a1" && ev.NodeID != "a2") {
				t.Errorf("event %+v; want a1 and a2 gone", ev)
			}
			gone[ev.NodeID] = true
		case <-time.After(15 * time.Second):
			t.Fatalf("only %v reported gone within 15s of their host's death", gone)
		}
	}
	ins, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if want := in.NodeID == "b1"; in.Running != want {
			t.Errorf("%s running = %v after ca's host died; want %v", in.NodeID, in.Running, want)
		}
	}
	if err := p.Delete(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	mk("a3", "ca")
	if pid, ok := p.running("a3"); !ok || pid == pids["a1"] {
		t.Errorf("a3 runs %v in pid %d; want a new host", ok, pid)
	}
}

// With a process per node, the nodes of one compute run in agent
// processes of their own, and killing one costs that node alone.
func TestProcessPerNodeLosesOneNode(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProviderWith(t, Options{ProcessPerNode: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pids := map[string]int{}
	for _, id := range []string{"a1", "a2"} {
		sp := spec(srv, id)
		sp.ComputeID = "ca"
		if _, err := p.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(context.Background(), id) })
		pids[id] = mustRun(t, p, id)
	}
	if pids["a1"] == pids["a2"] {
		t.Fatalf("a1 and a2 share agent process %d; want one each", pids["a1"])
	}
	events := make(chan provider.Event, 10)
	go p.Watch(ctx, func(ev provider.Event) { events <- ev })
	if err := syscall.Kill(pids["a1"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Kind != provider.EventGone || ev.NodeID != "a1" {
			t.Errorf("event %+v; want a1 gone", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a1 not reported gone within 15s of its agent's death")
	}
	if _, ok := p.running("a2"); !ok {
		t.Error("a2 stopped with a1's agent")
	}
}

// An agent counts as running from the moment Create returns: on a busy
// machine the kernel may still be loading its program then, its command
// line empty. Read as dead, the watch reported a node gone that had just
// started, and a second Create started a second agent. A process with no
// command line that is not such an agent is not taken for one.
func TestAnAgentInsideItsExecIsItsNodesAgent(t *testing.T) {
	const pid, node = 4242, "n1"
	argv := []byte(cumulusBin + "\x00agent\x00--node-id\x00n1\x00--work-dir\x00/base/n1/work\x00")
	execing := procstat.Stat{State: 'R', PPID: 1, PGRP: pid, Session: pid, Flags: 0x400000}
	for _, c := range []struct {
		what    string
		cmdline []byte
		st      procstat.Stat
		node    string
		want    bool
	}{
		{"its agent", argv, procstat.Stat{}, node, true},
		{"another node's agent", argv, procstat.Stat{}, "n2", false},
		{"a program that reused the pid", []byte("sleep\x0030\x00"), procstat.Stat{}, node, false},
		{"an agent inside its exec", nil, execing, node, true},
		{"a zombie", nil, procstat.Stat{State: 'Z', PPID: 1, PGRP: pid, Session: pid}, node, false},
		{"a kernel thread", nil, procstat.Stat{State: 'S', PPID: 2, Flags: 0x00208040}, node, false},
		{"a process inside its exec in another session", nil, procstat.Stat{State: 'R', PPID: 1, PGRP: 7, Session: 7}, node, false},
	} {
		if got := looksLikeAgent(pid, c.cmdline, c.st, c.node); got != c.want {
			t.Errorf("%s: looksLikeAgent = %v; want %v", c.what, got, c.want)
		}
	}
}

// A node in a subnet, where the provider cannot make networks (no control
// plane served on the subnets' bridges here), is a configuration error in
// the provider's words.
func TestSubnetWithoutNetworksIsAConfigurationError(t *testing.T) {
	p := newTestProvider(t)
	srv := providertest.NewStubServer(t)
	s := spec(srv, "subnet")
	s.Subnet, s.NoPublicIP = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/a", true
	_, err := p.Create(context.Background(), s)
	if !provider.IsConfiguration(err) || !strings.Contains(err.Error(), "cannot place nodes in networks here") {
		t.Errorf("Create in a subnet without networks = %v; want a configuration error saying so", err)
	}
}
