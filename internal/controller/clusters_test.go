package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// errProvider is a provider failure of no particular kind (a timeout, an
// engine that did not answer): worth trying again soon.
var errProvider = errors.New("the engine did not answer")

// harness is a cluster controller over a real SQLite store, a fake clock
// and a recording provider; tests play the agents by writing the store.
type harness struct {
	t    testing.TB
	ctx  context.Context
	db   *store.DB
	clk  *clock.Fake
	prov *providertest.Fake
	c    *Clusters
	sc   api.Scope
	seq  int
	nid  int // nodes named so far
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newHarness(t testing.TB) *harness {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := &harness{t: t, ctx: ctx, db: db, clk: clock.NewFake(t0), prov: providertest.NewFake(),
		sc: api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}}
	h.c = h.newClusters()
	return h
}

// newClusters makes a cluster controller over the harness's store, clock
// and provider, as a server start does.
func (h *harness) newClusters() *Clusters {
	c := &Clusters{DB: h.db, Clock: h.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Provider: h.prov, Hub: hub.New(),
		NewJoinToken: func(id string) (string, string) { return "join-" + id, "hash-" + id },
		NewNodeID: func(c string, _ time.Time) string {
			h.nid++
			return fmt.Sprintf("%s-node-%d", c, h.nid)
		},
		HeartbeatTimeout: 60 * time.Second, ProvisionTimeout: 15 * time.Minute}
	c.Init()
	return c
}

func (h *harness) compute(name string, min, max int32, idle string) api.Compute {
	h.t.Helper()
	c := api.Compute{Name: name, Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2",
			ScaleSettings: &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}}}}
	if err := api.PrepareCompute(&c, name, nil, "local"); err != nil {
		h.t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = h.sc.ComputeID(name), api.StateSucceeded
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), name, c, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) submit(c api.Compute, instances int32) string {
	h.t.Helper()
	h.seq++
	j := store.Job{UID: fmt.Sprintf("job-%d", h.seq), Parent: h.sc.WorkspaceID(), Compute: c.ID, Created: h.clk.Now(),
		Doc: api.Job{Name: fmt.Sprintf("job-%d", h.seq), Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "true",
			ComputeID: c.ID, Resources: &api.JobResources{InstanceCount: instances}}}}
	j.Doc.SetStatus(api.JobQueued, h.clk.Now(), "")
	if err := store.InsertJob(h.ctx, h.db.Q(), &j); err != nil {
		h.t.Fatal(err)
	}
	return j.UID
}

func (h *harness) pass() {
	h.t.Helper()
	if _, err := h.c.RunOnce(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) nodes(c api.Compute) []store.Node {
	h.t.Helper()
	ns, err := store.NodesOf(h.ctx, h.db.Q(), c.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return ns
}

// register plays the agents of every preparing node: they become idle now.
func (h *harness) register(c api.Compute) {
	h.t.Helper()
	for _, n := range h.nodes(c) {
		if n.State == api.NodePreparing {
			n.State, n.Ready, n.IdleSince = api.NodeIdle, h.clk.Now(), h.clk.Now()
			if err := store.PutNode(h.ctx, h.db.Q(), n); err != nil {
				h.t.Fatal(err)
			}
		}
		h.c.Hub.Seen(n.ID, h.clk.Now())
	}
}

// heartbeat plays every agent polling now.
func (h *harness) heartbeat(c api.Compute) {
	for _, n := range h.nodes(c) {
		h.c.Hub.Seen(n.ID, h.clk.Now())
	}
}

// finish plays the agents reporting a job's exit code.
func (h *harness) finish(uid string, code int) {
	h.t.Helper()
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		j, err := store.GetJobByUID(h.ctx, q, uid)
		if err != nil {
			return err
		}
		for _, n := range j.Nodes {
			if err := lifecycle.Exited(h.ctx, q, j, n, j.Attempt, code, "", h.clk.Now()); err != nil {
				return err
			}
			if j, err = store.GetJobByUID(h.ctx, q, uid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) job(uid string) store.Job {
	h.t.Helper()
	j, err := store.GetJobByUID(h.ctx, h.db.Q(), uid)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *harness) counts(c api.Compute) map[string]int {
	out := map[string]int{}
	for _, n := range h.nodes(c) {
		out[n.State]++
	}
	return out
}

func (h *harness) storedCompute(c api.Compute) *api.Compute {
	h.t.Helper()
	d, err := store.Get[api.Compute](h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return &d.Value
}

func TestScaleFromZeroRunsJobsAndShrinksAfterIdle(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 2, "PT5S")
	jobs := []string{h.submit(c, 1), h.submit(c, 1), h.submit(c, 1)}

	h.pass()
	if got := h.counts(c)[api.NodePreparing]; got != 2 {
		t.Fatalf("preparing nodes = %d, want 2 (max 2 for 3 jobs)", got)
	}
	if got := h.storedCompute(c).Aml(); got.TargetNodeCount != 2 || len(got.Errors) == 0 {
		t.Fatalf("target = %d errors = %v, want target 2 and a 'blocked at max' error", got.TargetNodeCount, got.Errors)
	}
	h.register(c)
	h.pass()
	if st := h.job(jobs[0]).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("first job %s, want Preparing (assigned)", st)
	}
	if st := h.job(jobs[2]).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("third job %s, want Queued at max", st)
	}
	h.clk.Step(time.Second)
	h.finish(jobs[0], 0)
	h.pass()
	if st := h.job(jobs[2]).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("third job %s after a node freed up, want Preparing", st)
	}
	h.finish(jobs[1], 0)
	h.finish(jobs[2], 0)
	for _, id := range jobs {
		if st := h.job(id).Doc.Properties.Status; st != api.JobCompleted {
			t.Fatalf("job %s is %s, want Completed", id, st)
		}
	}
	// Idle for less than the timeout: kept.
	h.clk.Step(4 * time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 2 {
		t.Fatalf("nodes after 4s idle = %d, want 2 kept", got)
	}
	// At the timeout: removed through the provider, down to min 0.
	h.clk.Step(time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 0 {
		t.Fatalf("nodes after idle timeout = %d, want 0", got)
	}
	if len(h.prov.Nodes()) != 0 || len(h.prov.DeleteCalls) != 2 {
		t.Fatalf("provider live=%d deleted=%v, want 0 live and 2 deleted", len(h.prov.Nodes()), h.prov.DeleteCalls)
	}
	if a := h.storedCompute(c).Aml(); a.TargetNodeCount != 0 || len(a.Errors) != 0 {
		t.Fatalf("target=%d errors=%v, want 0 and none", a.TargetNodeCount, a.Errors)
	}
}

func TestIdleBoundaryNodeThatGetsAJobIsKept(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT10S")
	first := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	h.finish(first, 0)
	// Exactly at the idle boundary a new job arrives: the same pass
	// assigns it, so the node must not be removed.
	h.clk.Step(10 * time.Second)
	h.heartbeat(c)
	second := h.submit(c, 1)
	h.pass()
	if got := h.job(second).Doc.Properties.Status; got != api.JobPreparing {
		t.Fatalf("second job %s, want Preparing on the warm node", got)
	}
	if ns := h.nodes(c); len(ns) != 1 || ns[0].State != api.NodeRunning {
		t.Fatalf("nodes = %+v, want the one node running", ns)
	}
	if len(h.prov.DeleteCalls) != 0 {
		t.Fatalf("provider deleted %v, want nothing", h.prov.DeleteCalls)
	}
}

func TestMinKeptAndMaxLoweredDrainsBusyNodes(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 1, 3, "PT1S")
	h.pass()
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("nodes with min 1 = %d, want 1 created at once", got)
	}
	a, b := h.submit(c, 1), h.submit(c, 1)
	h.register(c)
	h.pass()
	h.register(c)
	h.pass()
	if h.job(a).Doc.Properties.Status != api.JobPreparing || h.job(b).Doc.Properties.Status != api.JobPreparing {
		t.Fatalf("jobs not both started: %s %s", h.job(a).Doc.Properties.Status, h.job(b).Doc.Properties.Status)
	}
	// Lower max to 1 while both nodes run: one drains (leaving), none is killed.
	comp := h.storedCompute(c)
	one := int32(1)
	comp.Aml().ScaleSettings.MaxNodeCount = &one
	comp.Aml().ScaleSettings.MinNodeCount = &one
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name, comp, 0, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.heartbeat(c)
	h.pass()
	cnt := h.counts(c)
	if cnt[api.NodeLeaving] != 1 || cnt[api.NodeRunning] != 1 || len(h.prov.DeleteCalls) != 0 {
		t.Fatalf("counts %v deleted %v, want 1 leaving 1 running, nothing deleted", cnt, h.prov.DeleteCalls)
	}
	// When the leaving node's job ends it is removed; the other stays (min 1).
	h.finish(a, 0)
	h.finish(b, 0)
	h.clk.Step(2 * time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("nodes = %d, want 1 (min)", got)
	}
}

func TestHeartbeatLossRequeuesJobAndReplacesNode(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT120S")
	j := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	lost := h.nodes(c)[0].ID
	h.clk.Step(59 * time.Second)
	h.pass()
	if st := h.nodes(c)[0].State; st != api.NodeRunning {
		t.Fatalf("node %s before the heartbeat timeout, want running", st)
	}
	h.clk.Step(2 * time.Second)
	h.pass() // marks it unusable and requeues the job
	if st := h.job(j).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("job %s after its node was lost, want Queued again", st)
	}
	h.pass() // removes the unusable node and asks for a replacement
	ns := h.nodes(c)
	if len(ns) != 1 || ns[0].ID == lost || ns[0].State != api.NodePreparing {
		t.Fatalf("nodes = %+v, want one new preparing node replacing %s", ns, lost)
	}
	if len(h.job(j).Doc.Properties.Attempts) != 1 || h.job(j).Doc.Properties.Attempts[0].Reason == "" {
		t.Fatalf("attempts = %+v, want one ended attempt with a reason", h.job(j).Doc.Properties.Attempts)
	}
}

// When one node of a 2-node job is lost, the job is requeued and the other
// node stops the old attempt: one node replaces the lost one, and no third
// node is created for the node still stopping (it would idle).
func TestNodeLossOfAGangJobReplacesOnlyTheLostNode(t *testing.T) {
	h := newHarness(t)
	c := h.compute("gang", 0, 3, "PT120S")
	j := h.submit(c, 2)
	h.pass()
	h.register(c)
	h.pass()
	if got := h.job(j).Nodes; len(got) != 2 {
		t.Fatalf("the job runs on %v, want 2 nodes", got)
	}
	lost, survivor := h.job(j).Nodes[0], h.job(j).Nodes[1]
	h.clk.Step(61 * time.Second)
	h.c.Hub.Seen(survivor, h.clk.Now())
	h.pass() // marks the silent node unusable and requeues the job
	if st := h.job(j).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("job %s after one of its nodes was lost, want Queued", st)
	}
	h.pass()
	h.pass()
	live := 0
	for _, n := range h.nodes(c) {
		if n.ID == lost && n.State != api.NodeUnusable {
			t.Errorf("the lost node is %s", n.State)
		}
		if n.State != api.NodeUnusable {
			live++
		}
	}
	if live != 2 {
		t.Fatalf("nodes = %+v; want the surviving node and one replacement", h.nodes(c))
	}
	// The survivor reports attempt 1 stopped; with the replacement ready,
	// attempt 2 runs on both.
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		return lifecycle.Exited(h.ctx, q, h.job(j), survivor, 1, 143, "the job no longer runs on this node", h.clk.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	h.register(c)
	h.pass()
	if got := h.job(j); got.Attempt != 2 || len(got.Nodes) != 2 || !slices.Contains(got.Nodes, survivor) {
		t.Fatalf("attempt %d on %v; want attempt 2 on the survivor and the replacement", got.Attempt, got.Nodes)
	}
}

func TestJobFailsAfterMaxAttemptsOfNodeLoss(t *testing.T) {
	h := newHarness(t)
	h.c.MaxAttempts = 2
	c := h.compute("cpu", 0, 1, "PT120S")
	j := h.submit(c, 1)
	for attempt := 1; attempt <= 2; attempt++ {
		h.pass()
		h.pass()
		h.register(c)
		h.pass()
		if got := h.job(j).Attempt; got != attempt {
			t.Fatalf("attempt = %d, want %d", got, attempt)
		}
		h.clk.Step(61 * time.Second)
		h.pass()
	}
	p := h.job(j).Doc.Properties
	if p.Status != api.JobFailed {
		t.Fatalf("status %s after 2 lost nodes with max 2 attempts, want Failed", p.Status)
	}
}

func TestProvisioningTimeoutAndProviderBackoff(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT120S")
	h.submit(c, 1)
	h.prov.NextCreateErr = errProvider
	h.pass()
	if got := h.storedCompute(c).Aml().Errors; len(got) == 0 {
		t.Fatal("no error on the compute after a provider failure")
	}
	h.pass() // within the backoff: no new attempt
	if len(h.prov.CreateCalls) != 1 {
		t.Fatalf("provider tried again during backoff (%d calls)", len(h.prov.CreateCalls))
	}
	h.clk.Step(1 * time.Second)
	h.prov.NextCreateErr = errProvider
	h.pass() // second failure, backoff doubles
	if len(h.prov.CreateCalls) != 2 || len(h.prov.Created) != 0 {
		t.Fatalf("%d calls, created %v; want a second, failed, try once the backoff passed", len(h.prov.CreateCalls), h.prov.Created)
	}
	h.clk.Step(1 * time.Second)
	h.pass()
	if len(h.prov.Created) != 0 {
		t.Fatalf("created %v before the doubled backoff passed", h.prov.Created)
	}
	h.clk.Step(1 * time.Second)
	h.pass()
	if len(h.prov.Created) != 1 {
		t.Fatalf("created %v, want one node once the backoff passed", h.prov.Created)
	}
	// The agent never registers: given up after the provisioning timeout.
	h.clk.Step(15*time.Minute + time.Second)
	h.pass()
	if cnt := h.counts(c); cnt[api.NodePreparing] != 0 {
		t.Fatalf("counts %v, want the stuck node no longer preparing", cnt)
	}
	if a := h.storedCompute(c).Aml(); a.AllocationState == "" || len(a.Errors) == 0 {
		t.Fatalf("compute shows no error after a provisioning timeout: %+v", a.Errors)
	}
}

// A pass reads only the head of a long queue, in priority order: a
// high-priority job submitted last starts first.
func TestLongQueueHeadInPriorityOrder(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 2, "PT5M")
	for i := 0; i < 10; i++ {
		h.submit(c, 1)
	}
	urgent := h.submit(c, 1)
	j := h.job(urgent)
	j.Doc.Properties.Priority = 10
	if err := store.UpdateJob(h.ctx, h.db.W(), &j); err != nil {
		t.Fatal(err)
	}
	h.pass()
	h.register(c)
	h.pass()
	if st := h.job(urgent).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("the high-priority job is %s; want it started first", st)
	}
	if st := h.job("job-1").Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("the oldest job is %s; want it started with the second node", st)
	}
	if a := h.storedCompute(c).Aml(); len(a.Errors) == 0 || !strings.Contains(a.Errors[0].Error.Message, "at maxNodeCount 2") {
		t.Fatalf("errors %+v; want the cluster blocked at its maximum", a.Errors)
	}
}

// txCounter counts the store's transactions.
type txCounter struct{ n atomic.Int64 }

func (o *txCounter) TxDone(time.Duration, bool)          { o.n.Add(1) }
func (o *txCounter) JobTransition(store.JobTransition)   {}
func (o *txCounter) NodeTransition(store.NodeTransition) {}

// A pass over clusters where nothing changed writes nothing: the status
// it would record is the one the compute has, and no write transaction
// is opened to find that out. A change (a job queued) is still written.
func TestSteadyPassOpensNoTransaction(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 1, 2, "PT1H")
	h.pass()
	h.register(c)
	h.pass()
	h.pass()
	txs := &txCounter{}
	h.db.SetObserver(txs)
	h.pass()
	h.pass()
	if n := txs.n.Load(); n != 0 {
		t.Errorf("two passes over a steady cluster made %d transactions, want none", n)
	}
	h.submit(c, 2)
	h.pass()
	if n := txs.n.Load(); n == 0 {
		t.Error("a pass after a job was queued wrote nothing")
	}
	if s := h.storedCompute(c).Aml(); s.TargetNodeCount != 2 {
		t.Errorf("target %d after a 2-node job was queued, want 2", s.TargetNodeCount)
	}
}
