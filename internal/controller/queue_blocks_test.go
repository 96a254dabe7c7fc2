package controller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (h *harness) event(ev provider.Event) {
	h.t.Helper()
	if err := h.c.HandleProviderEvent(h.ctx, ev); err != nil {
		h.t.Fatal(err)
	}
}

// A node waiting in the provider's scheduler's queue (Slurm's Resources)
// is a reason of the cluster, as a value, worded in ScaleUpBlocked and in
// the queued job's reason; it waits as long as the scheduler says, without
// the provisioning timeout, which counts from when its machine is there.
func TestSchedulerQueueReasonIsScaleUpBlocked(t *testing.T) {
	h := newHarness(t)
	c := h.compute("slurm", 0, 2, "PT60S")
	uid := h.submit(c, 1)
	h.pass()
	nodes := h.nodes(c)
	if len(nodes) != 1 {
		t.Fatalf("%d nodes; want 1", len(nodes))
	}
	node := nodes[0].ID
	wait := &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: "Resources", Queue: "gpu"}
	h.event(provider.Event{NodeID: node, Kind: provider.EventPending, Wait: wait})
	h.pass()
	a := h.storedCompute(c).Aml()
	want := api.Blocks{{Kind: api.BlockQueued, Wait: wait, Nodes: 1}}
	if !reflect.DeepEqual(a.Blocked, want) {
		t.Errorf("blocked = %+v; want %+v", a.Blocked, want)
	}
	msg := errorCodes(h.storedCompute(c))[api.CodeScaleUpBlocked]
	if wantMsg := "queued jobs wait: 1 new node waits in Slurm's queue (partition gpu): Resources (the machines do not have the CPUs, memory or GPUs it asks for free now)"; msg != wantMsg {
		t.Errorf("ScaleUpBlocked = %q; want %q", msg, wantMsg)
	}
	j := h.job(uid)
	if why := api.QueueReason(*h.storedCompute(c), &j.Doc, uid); !strings.Contains(why, "Slurm's queue (partition gpu): Resources") {
		t.Errorf("the queued job's reason = %q; want Slurm's", why)
	}

	h.clk.Step(time.Hour) // far beyond the provisioning timeout
	h.heartbeat(c)
	h.pass()
	if cnt := h.counts(c); cnt[api.NodePreparing] != 1 {
		t.Fatalf("counts %v after an hour in Slurm's queue; want the node still waiting", cnt)
	}

	h.event(provider.Event{NodeID: node, Kind: provider.EventRunning})
	h.pass()
	if a := h.storedCompute(c).Aml(); a.Blocked.Has(api.BlockQueued) {
		t.Errorf("blocked = %+v once the node's machine is there; want no queue reason", a.Blocked)
	}
	h.clk.Step(14 * time.Minute)
	h.pass()
	if cnt := h.counts(c); cnt[api.NodePreparing] != 1 {
		t.Fatalf("counts %v 14 min after the machine came; want the node still preparing", cnt)
	}
	h.clk.Step(2 * time.Minute)
	h.pass()
	if cnt := h.counts(c); cnt[api.NodePreparing] != 0 {
		t.Fatalf("counts %v 16 min after the machine came; want the provisioning timeout to give it up", cnt)
	}
}

// Two nodes waiting for the same reason are one reason with two nodes.
func TestQueueBlocksGroupNodes(t *testing.T) {
	r := &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: "Resources"}
	p := &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: "Priority"}
	nodes := []store.Node{{ID: "a", State: api.NodePreparing, Wait: r}, {ID: "b", State: api.NodePreparing, Wait: p},
		{ID: "c", State: api.NodePreparing, Wait: &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: "Resources"}},
		{ID: "d", State: api.NodePreparing}, {ID: "e", State: api.NodeUnusable, Wait: r}}
	got := queueBlocks(nodes)
	want := api.Blocks{{Kind: api.BlockQueued, Wait: r, Nodes: 2}, {Kind: api.BlockQueued, Wait: p, Nodes: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("queueBlocks = %+v; want %+v", got, want)
	}
	if s := got.ForCompute(nil); s != "2 new nodes wait in Slurm's queue: Resources (the machines do not have the CPUs, memory or GPUs it asks for free now); "+
		"1 new node waits in Slurm's queue: Priority (jobs of higher priority are ahead of it)" {
		t.Errorf("worded: %q", s)
	}
}

// When a node's agent says first that its machine was stopped from outside
// (SIGTERM), the provider's later Gone, with its reason, goes to the
// attempt the loss ended and to the requeued job's message, once.
func TestProviderReasonJoinsTheAgentsWord(t *testing.T) {
	h := newHarness(t)
	c := h.compute("slurm", 0, 1, "PT60S")
	uid := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	j := h.job(uid)
	if len(j.Nodes) != 1 {
		t.Fatalf("job on nodes %v; want 1", j.Nodes)
	}
	node := j.Nodes[0]
	const agents = "the node was stopped from outside while the job ran"
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		n, err := store.GetNode(h.ctx, q, node)
		if err != nil {
			return err
		}
		return lifecycle.NodeLost(h.ctx, q, n, api.NodeUnusable, agents, 3, h.clk.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	const slurms = "Slurm job 42 was cancelled (scancel, or an administrator) (CANCELLED)"
	h.event(provider.Event{NodeID: node, Kind: provider.EventGone, Reason: slurms})
	h.event(provider.Event{NodeID: node, Kind: provider.EventGone, Reason: slurms}) // told again
	j = h.job(uid)
	at := j.Doc.Properties.Attempts
	if len(at) != 1 || at[0].Reason != agents+": "+slurms {
		t.Fatalf("attempts = %+v; want the agent's words, then Slurm's, once", at)
	}
	if p := j.Doc.Properties; p.Status != api.JobQueued || p.StatusMessage != agents+": "+slurms+"; queued again" {
		t.Errorf("job %s %q; want queued again with Slurm's reason", p.Status, p.StatusMessage)
	}
	n, err := store.GetNode(h.ctx, h.db.Q(), node)
	if err != nil {
		t.Fatal(err)
	}
	if n.Reason != agents+": "+slurms {
		t.Errorf("node reason %q", n.Reason)
	}
}
