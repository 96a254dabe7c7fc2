package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
	"github.com/cumulus-ml/cumulus/internal/provider/slurm/slurmtest"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// These tests run against a real Slurm (slurmtest: munged, slurmctld and
// slurmd on loopback) whose node jobs run a freshly built cumulus agent.

var agentBin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "cumulus-slurm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin, _, err = testbin.Cumulus(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// lab is one test's Slurm, control-plane stub and provider options.
type lab struct {
	slurm *slurmtest.Cluster
	stub  *providertest.StubServer
	opts  Options
}

func newLab(t *testing.T) *lab {
	t.Helper()
	// Made before the Slurm: removed after it stopped, its jobs ended.
	dir, bin := t.TempDir(), t.TempDir()
	c := slurmtest.Start(t, slurmtest.Machine{})
	t.Setenv("SLURM_CONF", c.Conf)
	// The node jobs get this PATH (sbatch exports the server's): their
	// agents find the machine's 4 stand-in GPUs.
	if _, err := gputest.StandIn(bin, gputest.Four()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}
	})
	return &lab{slurm: c, stub: providertest.NewStubServer(t), opts: Options{
		AgentBinary: agentBin, WorkDir: filepath.Join(dir, "work"), LogDir: dir, NodeAddress: "127.0.0.0/8",
		Owner: dir, PollInterval: 100 * time.Millisecond}}
}

func (l *lab) provider(t *testing.T, mod ...func(*Options)) *Provider {
	t.Helper()
	o := l.opts
	for _, m := range mod {
		m(&o)
	}
	p, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *lab) spec(id string) provider.NodeSpec {
	return provider.NodeSpec{NodeID: id, ComputeID: "c", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14,
		ServerURL: l.stub.URL, JoinToken: "join-" + id}
}

func TestConformance(t *testing.T) {
	l := newLab(t)
	providertest.Run(t, func(t *testing.T) provider.Provider { return l.provider(t) }, l.spec)
}

// A node job is sized from the VM size, named after the node, tagged with
// its owner, placed in the compute's partition (else the tier's), never
// requeued by Slurm; its agent registers with the join token, which is in
// neither the script nor a command line.
func TestNodeJobIsSizedPlacedAndJoins(t *testing.T) {
	l := newLab(t)
	p := l.provider(t, func(o *Options) { o.LowPriorityPartition = slurmtest.Spot })
	ctx := context.Background()
	spec := l.spec("gpu-node-1")
	spec.VCPUs, spec.MemoryGB, spec.GPUs, spec.LowPriority = 6, 112, 2, true
	pid, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.NodeID) })
	id := strings.TrimPrefix(pid, idPrefix)
	waitFor(t, "the agent to register", func() bool { return l.stub.JoinToken(spec.NodeID) != "" })
	if tok := l.stub.JoinToken(spec.NodeID); tok != spec.JoinToken {
		t.Errorf("the agent registered with %q; want the node's join token", tok)
	}
	job := l.slurm.Must("scontrol", "show", "job", id)
	for _, want := range []string{"JobName=" + spec.NodeID, "Partition=" + slurmtest.Spot, "NumCPUs=6", "MinMemoryNode=112G",
		"TresPerNode=gres:gpu:2", "Requeue=0", "Comment=" + p.tag} {
		if !strings.Contains(job, want) {
			t.Errorf("scontrol show job lacks %q:\n%s", want, job)
		}
	}
	if idx := l.slurm.GPUIndexes(id); len(idx) != 2 {
		t.Errorf("Slurm gave the node GPUs %v; want 2", idx)
	}
	script := l.slurm.Must("scontrol", "write", "batch_script", id, "-")
	if strings.Contains(script, spec.JoinToken) || strings.Contains(job, spec.JoinToken) {
		t.Errorf("the join token is in the job's script or record")
	}
	for _, want := range []string{"--gpu-devices env:CUDA_VISIBLE_DEVICES", "--address '127.0.0.0/8'", "SLURM_CPUS_ON_NODE", "SLURM_MEM_PER_NODE"} {
		if !strings.Contains(script, want) {
			t.Errorf("the batch script lacks %q:\n%s", want, script)
		}
	}

	// A dedicated node of a compute with a placement of its own.
	spec2 := l.spec("placed-node")
	spec2.Slurm = &api.SlurmPlacement{Partition: slurmtest.Urgent}
	pid2, err := p.Create(ctx, spec2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec2.NodeID) })
	if job := l.slurm.Must("scontrol", "show", "job", strings.TrimPrefix(pid2, idPrefix)); !strings.Contains(job, "Partition="+slurmtest.Urgent) {
		t.Errorf("a compute's own partition was not used:\n%s", job)
	}
}

// Nodes waiting for a machine are Starting in List and tell Slurm's reason
// as a value; List of another control plane's provider does not see them.
func TestPendingNodeTellsSlurmsReason(t *testing.T) {
	l := newLab(t)
	p := l.provider(t)
	ctx := context.Background()
	blocker := l.slurm.Submit("#!/bin/sh\nsleep 600\n", "--partition="+slurmtest.Urgent, "--cpus-per-task=64", "--mem=1000")
	waitFor(t, "the outside job to run", func() bool { return l.slurm.State(blocker) == "RUNNING" })

	events := watch(t, p)
	spec := l.spec("waiting-node")
	if _, err := p.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.NodeID) })
	ev := events.wait(t, spec.NodeID, provider.EventPending)
	if ev.Wait == nil || ev.Wait.Scheduler != api.SchedulerSlurm || ev.Wait.Reason != "Resources" || ev.Wait.Queue != slurmtest.Batch {
		t.Errorf("pending event %+v (wait %+v); want Slurm's Resources in partition %s", ev, ev.Wait, slurmtest.Batch)
	}
	in := find(t, p, spec.NodeID)
	if in == nil || !in.Starting || in.Running {
		t.Errorf("List shows the waiting node as %+v; want Starting", in)
	}
	other := l.provider(t, func(o *Options) { o.Owner = "another control plane" })
	if in := find(t, other, spec.NodeID); in != nil {
		t.Errorf("another control plane's provider lists the node: %+v", in)
	}
	again := l.provider(t) // this control plane after a restart
	if in := find(t, again, spec.NodeID); in == nil || !in.Starting {
		t.Errorf("after a restart List shows %+v; want the waiting node Starting", in)
	}

	l.slurm.Must("scancel", blocker)
	waitFor(t, "the node to run once the machine is free", func() bool {
		in := find(t, p, spec.NodeID)
		return in != nil && in.Running
	})
}

// A node job cancelled from outside is told: Terminating while Slurm ends
// it, then Gone with Slurm's state. A Delete that comes while Slurm still
// ends it waits for the end, which is told before Delete returns.
func TestCancelFromOutsideIsTold(t *testing.T) {
	l := newLab(t)
	fake := clock.NewFake(time.Now())
	p := l.provider(t, func(o *Options) { o.Clock = fake }) // the watch reads once; then only Delete reads for it
	ctx := context.Background()
	spec := l.spec("cancelled-node")
	pid, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to register", func() bool { return l.stub.JoinToken(spec.NodeID) != "" })
	events := watch(t, p)
	if err := fake.BlockUntil(ctx, 1); err != nil { // the watch has read the queue and waits
		t.Fatal(err)
	}
	l.slurm.Must("scancel", strings.TrimPrefix(pid, idPrefix))
	if err := p.Delete(ctx, spec.NodeID); err != nil {
		t.Fatal(err)
	}
	ev, ok := events.last(spec.NodeID, provider.EventGone)
	if !ok || !strings.Contains(ev.Reason, "CANCELLED") {
		t.Fatalf("after Delete the watch was told %+v; want Gone with CANCELLED", events.all())
	}
	if in := find(t, p, spec.NodeID); in != nil {
		t.Errorf("List shows the cancelled node: %+v", in)
	}

	// A node the provider deletes itself ends without news.
	own := l.spec("deleted-node")
	if _, err := p.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its agent to register", func() bool { return l.stub.JoinToken(own.NodeID) != "" })
	if err := p.Delete(ctx, own.NodeID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its Slurm job to end", func() bool {
		return len(l.slurm.Live(own.NodeID)) == 0 && !strings.Contains(strings.Join(l.slurm.Jobs(), "\n"), "COMPLETING")
	})
	fake.Step(time.Hour) // the watch reads the queue again
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fake.Step(time.Hour) // and once more: the read after the step has been told
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.all() {
		if ev.NodeID == own.NodeID && (ev.Kind == provider.EventGone || ev.Kind == provider.EventTerminating) {
			t.Errorf("the watch told %+v of a node the provider deleted itself", ev)
		}
	}
}

// A node of the spot partition is preempted by a job of a higher priority
// tier: its agent gets SIGTERM (Slurm's grace), the watch tells Gone with
// PREEMPTED, and Slurm does not requeue the node job.
func TestPreemptedSpotNodeIsGone(t *testing.T) {
	l := newLab(t)
	p := l.provider(t, func(o *Options) { o.LowPriorityPartition = slurmtest.Spot })
	ctx := context.Background()
	spec := l.spec("spot-node")
	spec.LowPriority = true
	pid, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.NodeID) })
	waitFor(t, "the agent to register", func() bool { return l.stub.JoinToken(spec.NodeID) != "" })
	events := watch(t, p)
	l.slurm.Submit("#!/bin/sh\nsleep 600\n", "--partition="+slurmtest.Urgent, "--cpus-per-task=64", "--mem=1000")
	ev := events.wait(t, spec.NodeID, provider.EventGone)
	if !strings.Contains(ev.Reason, "PREEMPTED") {
		t.Errorf("gone event %+v; want Slurm's PREEMPTED", ev)
	}
	if got := l.slurm.Live(spec.NodeID); len(got) != 0 {
		t.Errorf("Slurm requeued the preempted node job: %v live (was %s)", got, pid)
	}
}

// CheckNode refuses, with Slurm's words, a node no machine of the
// partition can hold and a partition that does not exist; New refuses
// default placements sbatch refuses.
func TestCheckNodeAsksSlurm(t *testing.T) {
	l := newLab(t)
	p := l.provider(t)
	ctx := context.Background()
	fits := l.spec("x")
	fits.GPUs = 4
	if err := p.CheckNode(ctx, fits); err != nil {
		t.Errorf("a node with the machine's 4 GPUs was refused: %v", err)
	}
	big := l.spec("x")
	big.GPUs = 8
	err := p.CheckNode(ctx, big)
	if !errors.Is(err, provider.ErrNeverFits) || !strings.Contains(err.Error(), "Requested node configuration is not available") {
		t.Errorf("CheckNode of 8 GPUs = %v; want ErrNeverFits with Slurm's words", err)
	}
	var r *provider.Refusal
	if !errors.As(err, &r) || r.Setting != "vmSize" {
		t.Errorf("CheckNode of 8 GPUs = %#v; want a refusal about the vmSize", err)
	}
	nowhere := l.spec("x")
	nowhere.Slurm = &api.SlurmPlacement{Partition: "nope"}
	if err := p.CheckNode(ctx, nowhere); !errors.As(err, &r) || r.Setting != "slurm" || !strings.Contains(err.Error(), "nope") {
		t.Errorf("CheckNode in partition nope = %v; want a refusal of the placement naming it", err)
	}
	// The test Slurm's KillWait is 30 s: a preempted node's agent may need
	// up to that after SIGTERM.
	spot := l.spec("x")
	spot.LowPriority, spot.GracePeriod = true, 30*time.Second
	if err := p.CheckNode(ctx, spot); err != nil {
		t.Errorf("CheckNode of a spot node needing 30 s = %v", err)
	}
	spot.GracePeriod = 40 * time.Second
	if err := p.CheckNode(ctx, spot); !errors.As(err, &r) || r.Setting != "preemptionGracePeriod" || !strings.Contains(err.Error(), "KillWait") {
		t.Errorf("CheckNode of a spot node needing 40 s = %v; want a refusal of the grace period naming KillWait", err)
	}
	// Create of a node Slurm would never run is a configuration error (the
	// controller waits for the compute to change); of one that fits, none.
	nowhere.NodeID = "nowhere"
	if _, err := p.Create(ctx, nowhere); !provider.IsConfiguration(err) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Create in partition nope = %v; want a ConfigurationError with Slurm's words", err)
	}

	o := l.opts
	o.LowPriorityPartition = "nope"
	if _, err := New(ctx, o); err == nil || !strings.Contains(err.Error(), "low priority: partition nope") {
		t.Errorf("New with low-priority partition nope = %v; want a refusal naming it", err)
	}
}

func TestNewNeedsAbsolutePaths(t *testing.T) {
	for _, o := range []Options{{WorkDir: "work"}, {LogDir: "logs"}, {AgentBinary: "cumulus"}} {
		if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "absolute") {
			t.Errorf("New(%+v) = %v; want an error about absolute paths", o, err)
		}
	}
}

// recorder keeps the events a watch tells.
type recorder struct {
	mu    sync.Mutex
	evs   []provider.Event
	reads chan struct{}
}

func watch(t *testing.T, p *Provider) *recorder {
	r := &recorder{reads: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Watch(ctx, func(ev provider.Event) {
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *recorder) all() []provider.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.Event(nil), r.evs...)
}

func (r *recorder) last(node string, kind provider.EventKind) (provider.Event, bool) {
	evs := r.all()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].NodeID == node && evs[i].Kind == kind {
			return evs[i], true
		}
	}
	return provider.Event{}, false
}

func (r *recorder) wait(t *testing.T, node string, kind provider.EventKind) provider.Event {
	t.Helper()
	var ev provider.Event
	waitFor(t, fmt.Sprintf("a %s event of %s", kind, node), func() bool {
		var ok bool
		ev, ok = r.last(node, kind)
		return ok
	})
	return ev
}

func find(t *testing.T, p provider.Provider, node string) *provider.Instance {
	t.Helper()
	ins, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.NodeID == node {
			return &in
		}
	}
	return nil
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A deleted node's work dir is removed from its machine once its agent
// has exited.
func TestDeleteRemovesWorkDir(t *testing.T) {
	l := newLab(t)
	p := l.provider(t)
	ctx := context.Background()
	spec := l.spec("short-lived")
	if _, err := p.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to register", func() bool { return l.stub.JoinToken(spec.NodeID) != "" })
	work := filepath.Join(l.opts.WorkDir, spec.NodeID)
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("the node's work dir: %v", err)
	}
	if err := p.Delete(ctx, spec.NodeID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the work dir removed", func() bool {
		_, err := os.Stat(work)
		return errors.Is(err, os.ErrNotExist)
	})
}

// BenchmarkList: List of a control plane with 200 node jobs (held, so that
// they stay pending) among 200 jobs of others, one squeue and its parse.
//
//	go test ./internal/provider/slurm/ -run '^$' -bench List -benchtime 200x
func BenchmarkList(b *testing.B) {
	dir := b.TempDir()
	c := slurmtest.Start(b, slurmtest.Machine{})
	b.Setenv("SLURM_CONF", c.Conf)
	p, err := New(context.Background(), Options{AgentBinary: agentBin, WorkDir: dir, LogDir: dir, Owner: dir})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		c.Submit("#!/bin/sh\ntrue\n", "--hold", fmt.Sprintf("--job-name=node-%d", i), "--comment="+p.tag)
		c.Submit("#!/bin/sh\ntrue\n", "--hold", fmt.Sprintf("--job-name=other-%d", i))
	}
	b.ResetTimer()
	for range b.N {
		ins, err := p.List(context.Background())
		if err != nil || len(ins) != 200 {
			b.Fatalf("List = %d nodes, %v; want 200", len(ins), err)
		}
	}
}
