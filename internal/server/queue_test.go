package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func withQueuePolicy(p map[string]any) func(map[string]any) {
	return func(m map[string]any) { inner(m)["queuePolicy"] = p }
}

// The queue policy over HTTP: set by PUT (canonical on the way back),
// refused with a clear error when malformed (nothing stored), changed by
// PATCH; a fair-share compute's GET says where each group stands, its
// queue view lists the scheduler's order, and a change of grouping moves
// the queued jobs.
func TestQueuePolicyOverHTTP(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	alice := h.user("alice", "", "")
	bob := h.user("bob", "", "")
	h.grant("alice", "Contributor", hWSPath)
	h.grant("bob", "Contributor", hWSPath)
	c := h.create("shared", computeBody(withQueuePolicy(map[string]any{"kind": "fairshare", "weights": map[string]any{"bob": 2}})))
	if p := c.Aml().QueuePolicy; p == nil || p.Kind != "FairShare" || p.FairShareBy != "principal" || p.UsageHalfLife != "P1D" || p.Preemption != "None" {
		t.Fatalf("queue policy after PUT %+v", p)
	}
	for name, body := range map[string]map[string]any{
		"bad kind":         {"kind": "Lottery"},
		"weights on FIFO":  {"kind": "Fifo", "weights": map[string]any{"a": 2}},
		"bad grouping":     {"kind": "FairShare", "fairShareBy": "team"},
		"zero weight":      {"kind": "FairShare", "weights": map[string]any{"a": 0}},
		"over share FIFO":  {"kind": "Fifo", "preemption": "OverShare"},
		"short half-life":  {"kind": "FairShare", "usageHalfLife": "PT1S"},
		"runtime, no mode": {"kind": "FairShare", "minRuntime": "PT5M"},
	} {
		t.Run(name, func(t *testing.T) {
			var e api.ErrorResponse
			h.do("PUT", computePath("bad"), computeBody(withQueuePolicy(body))).want(t, 400, "ValidationError").json(t, &e)
			if !strings.HasPrefix(e.Error.Target, "properties.properties.queuePolicy") {
				t.Errorf("error target %q", e.Error.Target)
			}
			h.do("GET", computePath("bad"), nil).want(t, 404)
			h.do("PATCH", computePath("shared"), map[string]any{"properties": map[string]any{"properties": map[string]any{"queuePolicy": body}}}).want(t, 400, "ValidationError")
		})
	}

	for i := range 4 {
		h.as(alice, "PUT", fmt.Sprintf("%s/jobs/a%d", hWSPath, i), jobBody("shared")).want(t, 201)
	}
	for i := range 2 {
		h.as(bob, "PUT", fmt.Sprintf("%s/jobs/b%d", hWSPath, i), jobBody("shared")).want(t, 201)
	}
	var j api.Job
	h.do("GET", hWSPath+"/jobs/b0", nil).want(t, 200).json(t, &j)
	if g := j.Properties.FairShareGroup; g == nil || *g != "bob" {
		t.Errorf("bob's job's group %v", g)
	}
	got := h.do("GET", computePath("shared"), nil).want(t, 200).compute(t)
	fs := got.Aml().FairShare
	if fs == nil || fs.Unit != "node" || len(fs.Groups) != 2 {
		t.Fatalf("fairShare %+v", fs)
	}
	if a, b := fs.Groups[0], fs.Groups[1]; a.Name != "alice" || a.QueuedJobs != 4 || a.Weight != 1 || b.Name != "bob" || b.QueuedJobs != 2 || b.Weight != 2 {
		t.Errorf("groups %+v", fs.Groups)
	}
	// maxNodeCount 2, shared 1:2 by weight.
	if a, b := fs.Groups[0].Share, fs.Groups[1].Share; fmt.Sprintf("%.2f %.2f", a, b) != "0.67 1.33" {
		t.Errorf("shares %v %v, want 2/3 and 4/3", a, b)
	}
	var q api.QueueView
	h.do("GET", computePath("shared")+"/queue", nil).want(t, 200).json(t, &q)
	var order []string
	for _, e := range q.Jobs {
		order = append(order, e.Name)
	}
	// bob weighs 2: two of his for one of alice's.
	// (ties go to the job submitted first).
	if got := strings.Join(order, " "); got != "a0 b0 b1 a1 a2 a3" || q.Queued != 6 || q.FairShare == nil || q.Jobs[0].Position != 1 {
		t.Errorf("queue %q (%d queued), want a0 b0 b1 a1 a2 a3", got, q.Queued)
	}
	q = api.QueueView{}
	h.do("GET", computePath("shared")+"/queue?$top=2", nil).want(t, 200).json(t, &q)
	if len(q.Jobs) != 2 || q.Queued != 6 {
		t.Errorf("$top=2: %d jobs of %d", len(q.Jobs), q.Queued)
	}
	h.do("GET", computePath("shared")+"/queue?$top=0", nil).want(t, 400, "BadRequest")
	h.do("GET", computePath("nope")+"/queue", nil).want(t, 404)

	// Grouped by a tag from now on: the queued jobs move.
	h.do("PATCH", computePath("shared"), `{"properties":{"properties":{"queuePolicy":{"kind":"FairShare","fairShareBy":"tag:team"}}}}`).want(t, 200)
	j = api.Job{}
	h.do("GET", hWSPath+"/jobs/b0", nil).want(t, 200).json(t, &j)
	if g := j.Properties.FairShareGroup; g == nil || *g != "" {
		t.Errorf("after grouping by tag, an untagged job's group %v, want the untagged group", deref(g))
	}
	got = h.do("GET", computePath("shared"), nil).want(t, 200).compute(t)
	if fs := got.Aml().FairShare; fs == nil || len(fs.Groups) != 1 || fs.Groups[0].Display != "(no team tag)" || fs.Groups[0].QueuedJobs != 6 {
		t.Errorf("fairShare after regrouping %+v", fs)
	}
	// FIFO again: no groups.
	h.do("PATCH", computePath("shared"), `{"properties":{"properties":{"queuePolicy":{"kind":"Fifo"}}}}`).want(t, 200)
	j = api.Job{}
	h.do("GET", hWSPath+"/jobs/b0", nil).want(t, 200).json(t, &j)
	got = h.do("GET", computePath("shared"), nil).want(t, 200).compute(t)
	if j.Properties.FairShareGroup != nil || got.Aml().FairShare != nil {
		t.Errorf("FIFO: job group %v, compute fairShare %+v", j.Properties.FairShareGroup, got.Aml().FairShare)
	}
	q = api.QueueView{}
	h.do("GET", computePath("shared")+"/queue", nil).want(t, 200).json(t, &q)
	if q.Policy.Kind != "Fifo" || q.FairShare != nil || len(q.Jobs) != 6 || q.Jobs[0].Name != "a0" {
		t.Errorf("FIFO queue %+v", q)
	}
}

// A team that may submit jobs but not change computes (Contributor on the
// workspace's jobs, Reader on the workspace) reads the queue and cannot
// change the queue policy; a principal without a role reads nothing.
func TestQueuePolicyAuthorization(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("shared", computeBody(withQueuePolicy(map[string]any{"kind": "FairShare"})))
	member := h.user("member", "Reader", hWSPath)
	h.grant("member", "Contributor", hWSPath+"/jobs")
	stranger := h.user("stranger", "", "")
	h.as(member, "PUT", hWSPath+"/jobs/m1", jobBody("shared")).want(t, 201)
	h.as(member, "GET", computePath("shared")+"/queue", nil).want(t, 200)
	h.as(member, "PATCH", computePath("shared"), `{"properties":{"properties":{"queuePolicy":{"kind":"FairShare","weights":{"member":100}}}}}`).want(t, 403)
	h.as(stranger, "GET", computePath("shared")+"/queue", nil).want(t, 403)
	got := h.do("GET", computePath("shared"), nil).want(t, 200).compute(t)
	if got.Aml().QueuePolicy.Weights != nil {
		t.Errorf("a refused PATCH changed the weights: %+v", got.Aml().QueuePolicy)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
