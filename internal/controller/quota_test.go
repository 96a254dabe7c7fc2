package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// withLimits makes the controller read its quota limits from *l, so that a
// test changes them as updateQuotas would.
func (h *harness) withLimits(l *quota.Limits) {
	h.c.Limits = func(context.Context, store.Querier, string, string) (quota.Limits, error) { return *l, nil }
}

// dsv2Limits allows family cores of standardDSv2Family and plenty of
// everything else.
func dsv2Limits(family int64) *quota.Limits {
	return &quota.Limits{Family: map[string]int64{"standardDSv2Family": family}, DefaultFam: 1000, Dedicated: 1000, LowPriority: 1000}
}

// usage counts the cores of every node in the store, as the usages API
// does.
func (h *harness) usage() quota.Usage {
	h.t.Helper()
	var nodes []quota.Node
	docs, err := store.List[api.Compute](h.ctx, h.db.Q(), store.KindCompute, "/subscriptions", false, "", 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, d := range docs {
		for _, n := range h.nodes(d.Value) {
			nodes = append(nodes, quota.Node{VMSize: n.VMSize, LowPriority: n.Priority == api.PriorityLowPriority})
		}
	}
	return quota.Count(nodes)
}

// checkedPass runs a pass and asserts that the nodes that exist after it
// stay within the family's limit.
func (h *harness) checkedPass(limit int64) {
	h.t.Helper()
	h.pass()
	if got := h.usage().Family["standardDSv2Family"]; got > limit {
		h.t.Fatalf("standardDSv2Family uses %d cores after a pass, over its quota of %d", got, limit)
	}
}

// message is what the controller recorded on a job: its own reason to
// wait (worded), or its status message.
func (h *harness) message(uid string) string {
	h.t.Helper()
	p := h.job(uid).Doc.Properties
	if p.Waiting != nil {
		return p.Waiting.ForJob(nil)
	}
	return p.StatusMessage
}

// reason is a job's status message as a reader of the job sees it: with
// its compute's reasons.
func (h *harness) reason(j store.Job) string {
	h.t.Helper()
	p := &j.Doc.Properties
	if !p.WordsWait() {
		return p.StatusMessage
	}
	sc, name, err := api.ParseComputeID(j.Compute, api.Scope{})
	if err != nil {
		h.t.Fatal(err)
	}
	d, err := store.Get[api.Compute](h.ctx, h.db.Q(), store.KindCompute, sc.WorkspaceID(), name)
	if err != nil {
		h.t.Fatal(err)
	}
	return api.QueueReason(d.Value, &j.Doc, j.UID)
}

func errorCodes(c *api.Compute) map[string]string {
	out := map[string]string{}
	for _, e := range c.Aml().Errors {
		if e.Error != nil {
			out[e.Error.Code] = e.Error.Message
		}
	}
	return out
}

// TestClustersShareFamilyQuota: two clusters of one family compete for 8
// cores (two Standard_DS3_v2 nodes). They never hold more together, the
// waiting jobs and the blocked cluster say why, and when the first cluster
// scales down the second grows in the same pass.
func TestClustersShareFamilyQuota(t *testing.T) {
	h := newHarness(t)
	h.withLimits(dsv2Limits(8))
	a := h.compute("a-cluster", 0, 4, "PT30S")
	b := h.compute("b-cluster", 0, 4, "PT30S")
	aJobs := []string{h.submit(a, 1), h.submit(a, 1), h.submit(a, 1)}
	bJobs := []string{h.submit(b, 1), h.submit(b, 1)}

	h.checkedPass(8)
	if na, nb := len(h.nodes(a)), len(h.nodes(b)); na != 2 || nb != 0 {
		t.Fatalf("nodes a=%d b=%d, want a=2 (all the quota, first in the pass) b=0", na, nb)
	}
	want := "waiting for quota: standardDSv2Family needs 4 more cores, 0 of 8 free in location local"
	for _, j := range []string{aJobs[2], bJobs[0], bJobs[1]} {
		if got := h.message(j); got != want {
			t.Errorf("job %s message %q, want %q", j, got, want)
		}
		if st := h.job(j).Doc.Properties.Status; st != api.JobQueued {
			t.Errorf("job %s is %s, want still Queued", j, st)
		}
	}
	for _, j := range aJobs[:2] {
		if got := h.message(j); got != "" {
			t.Errorf("job %s has nodes coming but says %q", j, got)
		}
	}
	errs := errorCodes(h.storedCompute(b))
	if msg := errs[api.CodeQuotaExceeded]; !strings.Contains(msg, "0 of the 2 nodes") || !strings.Contains(msg, "standardDSv2Family needs 8 more cores, 0 of 8 free") ||
		!strings.Contains(msg, "cumulus quota update --location local --family standardDSv2Family") {
		t.Errorf("b's QuotaExceeded error = %q", msg)
	}
	if _, ok := errs["ScaleUpBlocked"]; ok {
		t.Errorf("b's errors repeat quota as ScaleUpBlocked: %v", errs)
	}
	if tgt := h.storedCompute(b).Aml().TargetNodeCount; tgt != 0 {
		t.Errorf("b's target %d, want 0 (what quota allows)", tgt)
	}

	// A's nodes come up and run two jobs, then its third; b keeps waiting.
	h.register(a)
	h.checkedPass(8)
	for _, j := range aJobs[:2] {
		if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
			t.Fatalf("job %s is %s, want Preparing", j, st)
		}
	}
	h.clk.Step(time.Second)
	h.finish(aJobs[0], 0)
	h.heartbeat(a)
	h.checkedPass(8)
	if st := h.job(aJobs[2]).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("a's third job is %s, want Preparing on the freed node", st)
	}
	if got := h.message(aJobs[2]); got != "" {
		t.Errorf("a started job still says %q", got)
	}
	if len(h.nodes(b)) != 0 || h.message(bJobs[0]) != want {
		t.Fatalf("b has %d nodes, message %q; want none and still waiting", len(h.nodes(b)), h.message(bJobs[0]))
	}

	// A's jobs end; after its idle time its nodes go, and b grows in the
	// very pass that frees the cores (a comes first in the pass).
	h.finish(aJobs[1], 0)
	h.finish(aJobs[2], 0)
	h.clk.Step(29 * time.Second)
	h.heartbeat(a)
	h.checkedPass(8)
	if len(h.nodes(a)) != 2 || len(h.nodes(b)) != 0 {
		t.Fatalf("before a's idle time: a=%d b=%d nodes, want 2 and 0", len(h.nodes(a)), len(h.nodes(b)))
	}
	h.clk.Step(2 * time.Second)
	h.heartbeat(a)
	h.checkedPass(8)
	if na, nb := len(h.nodes(a)), len(h.nodes(b)); na != 0 || nb != 2 {
		t.Fatalf("after a scaled down: a=%d b=%d nodes, want 0 and 2", na, nb)
	}
	for _, j := range bJobs {
		if got := h.message(j); got != "" {
			t.Errorf("job %s still says %q once its node is coming", j, got)
		}
	}
	if errs := errorCodes(h.storedCompute(b)); len(errs) != 0 {
		t.Errorf("b's errors after it grew: %v", errs)
	}
	h.register(b)
	h.checkedPass(8)
	for _, j := range bJobs {
		if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
			t.Errorf("b's job %s is %s, want Preparing", j, st)
		}
	}
}

// TestFreedQuotaRerunsPassAtOnce: when a cluster later in the pass frees
// cores that a cluster earlier in it waited for, the pass asks to run
// again at once, and the next pass grows the waiting cluster.
func TestFreedQuotaRerunsPassAtOnce(t *testing.T) {
	h := newHarness(t)
	h.withLimits(dsv2Limits(4))
	late := h.compute("z-frees", 0, 1, "PT10S")
	j := h.submit(late, 1)
	h.checkedPass(4)
	h.register(late)
	h.checkedPass(4)
	h.finish(j, 0)

	early := h.compute("a-waits", 0, 1, "PT10S")
	w := h.submit(early, 1)
	h.checkedPass(4)
	if len(h.nodes(early)) != 0 || !strings.HasPrefix(h.message(w), "waiting for quota: ") {
		t.Fatalf("a-waits has %d nodes, message %q; want none while z-frees holds the quota", len(h.nodes(early)), h.message(w))
	}
	h.clk.Step(10 * time.Second)
	h.heartbeat(late)
	wake, err := h.c.RunOnce(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.nodes(late)) != 0 {
		t.Fatalf("z-frees kept %d nodes after its idle time", len(h.nodes(late)))
	}
	if !wake.Equal(h.clk.Now()) {
		t.Fatalf("pass that freed quota a waiting cluster needs asks to wake at %v, want now (%v)", wake, h.clk.Now())
	}
	h.checkedPass(4)
	if len(h.nodes(early)) != 1 || h.message(w) != "" {
		t.Fatalf("a-waits has %d nodes, message %q; want 1 node and no message", len(h.nodes(early)), h.message(w))
	}
	// Nothing more to do: the pass does not ask to rerun.
	if wake, _ := h.c.RunOnce(h.ctx); wake.Equal(h.clk.Now()) {
		t.Fatal("a pass with nothing freed asks to run again at once")
	}
}

// TestRaisingQuotaUnblocksWaitingJobs: a job that waits for quota gets its
// node as soon as the limit is raised, and its message goes.
func TestRaisingQuotaUnblocksWaitingJobs(t *testing.T) {
	h := newHarness(t)
	l := dsv2Limits(4)
	h.withLimits(l)
	c := h.compute("cpu", 0, 3, "PT120S")
	first, second, gang := h.submit(c, 1), h.submit(c, 1), h.submit(c, 2)
	h.checkedPass(4)
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("nodes = %d, want 1 (4 cores of quota)", got)
	}
	if got, want := h.message(second), "waiting for quota: standardDSv2Family needs 4 more cores, 0 of 4 free in location local"; got != want {
		t.Fatalf("second job says %q, want %q", got, want)
	}
	// The gang job would pass maxNodeCount 3 beside the others: it waits
	// for maxNodeCount, not quota.
	if got := h.message(gang); got != "" {
		t.Fatalf("gang job beyond maxNodeCount says %q", got)
	}

	// The total dedicated quota binds once the family is raised.
	l.Family["standardDSv2Family"], l.Dedicated = 100, 4
	h.checkedPass(100)
	if got, want := h.message(second), "waiting for quota: standardDSv2Family needs 4 more cores, 0 of 4 total dedicated cores free in location local"; got != want {
		t.Fatalf("second job says %q, want %q", got, want)
	}

	l.Dedicated = 1000
	h.checkedPass(100)
	if got := len(h.nodes(c)); got != 3 {
		t.Fatalf("nodes = %d after the quota was raised, want 3 (max)", got)
	}
	if got := h.message(second); got != "" {
		t.Fatalf("second job still says %q", got)
	}
	h.register(c)
	h.checkedPass(100)
	for _, j := range []string{first, second} {
		if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
			t.Errorf("job %s is %s, want Preparing", j, st)
		}
	}
	if errs := errorCodes(h.storedCompute(c)); errs[api.CodeQuotaExceeded] != "" {
		t.Errorf("quota error remains: %v", errs)
	}
}

// TestLowPriorityPoolSharedAcrossFamilies: low-priority clusters of
// different families draw on one pool, and their jobs' messages say so.
func TestLowPriorityPoolSharedAcrossFamilies(t *testing.T) {
	h := newHarness(t)
	h.withLimits(&quota.Limits{DefaultFam: 1000, Dedicated: 1000, LowPriority: 10})
	lowA := h.lowPriority("lp-ds", "Standard_DS3_v2", 2) // 4 cores a node
	lowB := h.lowPriority("lp-f", "Standard_F4s_v2", 2)  // 4 cores a node
	dedicated := h.compute("ded", 0, 2, "PT120S")        // not in the pool
	for _, c := range []api.Compute{lowA, lowA, lowB, lowB, dedicated} {
		h.submit(c, 1)
	}
	h.pass()
	u := h.usage()
	if u.LowPriority > 10 || len(h.nodes(lowA)) != 2 || len(h.nodes(lowB)) != 0 || len(h.nodes(dedicated)) != 1 {
		t.Fatalf("low-priority cores %d, nodes lp-ds=%d lp-f=%d ded=%d; want 8, 2, 0, 1",
			u.LowPriority, len(h.nodes(lowA)), len(h.nodes(lowB)), len(h.nodes(dedicated)))
	}
	queued, err := store.JobsByStatus(h.ctx, h.db.Q(), lowB.ID, api.JobQueued)
	if err != nil || len(queued) != 2 {
		t.Fatalf("queued jobs of lp-f: %d %v", len(queued), err)
	}
	want := "waiting for quota: standardFSv2Family needs 4 more low-priority cores, 2 of 10 free in location local"
	for _, j := range queued {
		if got := h.reason(j); got != want {
			t.Errorf("job %s says %q, want %q", j.UID, got, want)
		}
	}
}

func (h *harness) lowPriority(name, size string, max int32) api.Compute {
	h.t.Helper()
	min := int32(0)
	c := api.Compute{Name: name, Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: size, VMPriority: api.PriorityLowPriority,
			ScaleSettings: &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT120S"}}}}
	if err := api.PrepareCompute(&c, name, nil, "local"); err != nil {
		h.t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = h.sc.ComputeID(name), api.StateSucceeded
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), name, c, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// TestProviderBackoffIsNotCalledQuota: while the provider backs off, the
// cluster is not said to wait for quota.
func TestProviderBackoffIsNotCalledQuota(t *testing.T) {
	h := newHarness(t)
	h.withLimits(dsv2Limits(100))
	c := h.compute("cpu", 0, 2, "PT120S")
	j := h.submit(c, 1)
	h.prov.NextCreateErr = errProvider
	h.pass()
	h.pass() // within the backoff
	errs := errorCodes(h.storedCompute(c))
	if errs["NodeProvisioningFailed"] == "" || errs[api.CodeQuotaExceeded] != "" || strings.Contains(errs["ScaleUpBlocked"], "quota") {
		t.Fatalf("errors during provider backoff: %v", errs)
	}
	if got := h.message(j); strings.Contains(got, "quota") {
		t.Fatalf("job says %q during provider backoff", got)
	}
}

// TestQuotaMessageLeavesOtherMessages: a queued job's message about
// something else (a requeue reason) is not cleared by the quota bookkeeping.
func TestQuotaMessageLeavesOtherMessages(t *testing.T) {
	h := newHarness(t)
	h.withLimits(dsv2Limits(100))
	c := h.compute("cpu", 0, 1, "PT120S")
	j := h.submit(c, 1)
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		sj, err := store.GetJobByUID(h.ctx, q, j)
		if err != nil {
			return err
		}
		sj.Doc.Properties.StatusMessage = "requeued: node lost"
		return store.UpdateJob(h.ctx, q, &sj)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.pass()
	if got := h.message(j); got != "requeued: node lost" {
		t.Fatalf("message %q, want the requeue reason kept", got)
	}
}

// TestUnknownLimitsCreateNothing: when the limits cannot be read, the
// controller creates no node rather than risk going past quota.
func TestUnknownLimitsCreateNothing(t *testing.T) {
	h := newHarness(t)
	h.c.Limits = func(context.Context, store.Querier, string, string) (quota.Limits, error) {
		return quota.Limits{}, errors.New("store unavailable")
	}
	c := h.compute("cpu", 1, 2, "PT120S")
	h.submit(c, 1)
	h.pass()
	if n := len(h.nodes(c)); n != 0 || len(h.prov.Created) != 0 {
		t.Fatalf("%d nodes created with unknown limits", n)
	}
}
