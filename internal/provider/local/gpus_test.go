package local

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

// A local node offers the devices it was given of the machine's (here a
// stand-in nvidia-smi reporting four GPUs, a test double) and no others:
// it registers those, and its job is told those.
func TestNodeGetsItsDevices(t *testing.T) {
	dir := t.TempDir()
	if _, err := gputest.StandIn(dir, gputest.Four()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	p := newTestProvider(t)
	ctx := context.Background()
	m, err := p.Machine(ctx)
	if err != nil || len(m.Devices) != 4 {
		t.Fatalf("Machine = %+v, %v; want the stand-in's four GPUs", m, err)
	}
	srv := providertest.NewStubServer(t)
	s := spec(srv, "g1")
	s.GPUs, s.Devices = 2, []agentapi.GPU{m.Devices[1], m.Devices[3]}
	if _, err := p.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(ctx, "g1") })
	srvC := providertest.NewStubServer(t) // its own: an assignment goes to whichever node polls
	c := spec(srvC, "c1")
	c.GPUs = 0
	if _, err := p.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(ctx, "c1") })
	for deadline := time.Now().Add(15 * time.Second); srv.GPUs("g1") == nil || srvC.JoinToken("c1") == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the nodes did not register within 15s")
		}
	}
	if got := gpu.IDs(srv.GPUs("g1")); !reflect.DeepEqual(got, []string{"1", "3"}) {
		t.Errorf("the GPU node registered devices %v, want 1 and 3", got)
	}
	if got := srvC.GPUs("c1"); len(got) != 0 {
		t.Errorf("the CPU node registered devices %v, want none", got)
	}
	srv.Assign <- agentapi.Assignment{UID: "j1", Attempt: 1, GPUs: []int{1, 3}, Command: `echo "cuda=$CUDA_VISIBLE_DEVICES"`}
	for ev := srv.Event(t); ev.Phase != agentapi.PhaseExited; ev = srv.Event(t) {
	}
	b, _ := os.ReadFile(filepath.Join(p.o.BaseDir, "g1", workDir, "jobs", "j1", "std.log"))
	if got := strings.TrimSpace(string(b)); got != "cuda=1,3" {
		t.Errorf("the job saw %q, want cuda=1,3", got)
	}
}

// A node whose agent is killed is reported Gone without waiting for a
// heartbeat timeout, once.
func TestWatchReportsAKilledAgent(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p.Create(ctx, spec(srv, "w1")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), "w1") })
	events := make(chan provider.Event, 10)
	go p.Watch(ctx, func(ev provider.Event) { events <- ev })
	pid, ok := p.running("w1")
	if !ok {
		t.Fatal("the agent does not run")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.NodeID != "w1" || ev.Kind != provider.EventGone {
			t.Errorf("event %+v, want w1 Gone", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no event within 15s of the agent's death")
	}
	if again := p.deadAgents(map[string]int{"w1": pid}); len(again) != 0 {
		t.Errorf("the same death reported again: %+v", again)
	}
}
