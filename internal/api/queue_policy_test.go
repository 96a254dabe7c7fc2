package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const tgtQueue = "properties.properties.queuePolicy."

// A queue policy is checked, spelled and given its defaults; a setting
// that would have no effect is refused, and nothing is stored with an
// error.
func TestQueuePolicyValidation(t *testing.T) {
	good := []struct {
		in   api.QueuePolicy
		want api.QueuePolicy
	}{
		{api.QueuePolicy{Kind: "fairshare"}, api.QueuePolicy{Kind: "FairShare", FairShareBy: "principal", UsageHalfLife: "P1D", Preemption: "None"}},
		{api.QueuePolicy{Kind: "fifo"}, api.QueuePolicy{Kind: "Fifo", Preemption: "None"}},
		{api.QueuePolicy{Kind: "Fifo", Preemption: "lowerpriority"}, api.QueuePolicy{Kind: "Fifo", Preemption: "LowerPriority", MinRuntime: "PT10M"}},
		{api.QueuePolicy{Kind: "FairShare", FairShareBy: "tag:team", Weights: map[string]float64{"vision": 2}, UsageHalfLife: "PT6H", Preemption: "OverShare", MinRuntime: "PT30M"},
			api.QueuePolicy{Kind: "FairShare", FairShareBy: "tag:team", Weights: map[string]float64{"vision": 2}, UsageHalfLife: "PT6H", Preemption: "OverShare", MinRuntime: "PT30M"}},
	}
	for _, c := range good {
		comp := valCompute()
		p := c.in
		comp.Aml().QueuePolicy = &p
		if err := api.PrepareCompute(comp, "shared", nil, defLoc); err != nil {
			t.Fatalf("%+v: %v", c.in, err)
		}
		got := *comp.Aml().QueuePolicy
		if got.Kind != c.want.Kind || got.FairShareBy != c.want.FairShareBy || got.UsageHalfLife != c.want.UsageHalfLife ||
			got.Preemption != c.want.Preemption || got.MinRuntime != c.want.MinRuntime {
			t.Errorf("%+v prepared as %+v, want %+v", c.in, got, c.want)
		}
	}
	bad := []struct {
		in     api.QueuePolicy
		target string
		says   string
	}{
		{api.QueuePolicy{}, "kind", "needs a kind"},
		{api.QueuePolicy{Kind: "lottery"}, "kind", `"lottery" is not one of Fifo, FairShare`},
		{api.QueuePolicy{Kind: "Fifo", FairShareBy: "tag:team"}, "fairShareBy", "only to kind FairShare"},
		{api.QueuePolicy{Kind: "Fifo", Weights: map[string]float64{"a": 2}}, "weights", "only to kind FairShare"},
		{api.QueuePolicy{Kind: "Fifo", Preemption: "OverShare"}, "preemption", "needs kind FairShare"},
		{api.QueuePolicy{Kind: "FairShare", FairShareBy: "team"}, "fairShareBy", "not principal or tag:KEY"},
		{api.QueuePolicy{Kind: "FairShare", FairShareBy: "tag:"}, "fairShareBy", "not principal or tag:KEY"},
		{api.QueuePolicy{Kind: "FairShare", Weights: map[string]float64{"a": 0}}, "weights.a", "more than 0"},
		{api.QueuePolicy{Kind: "FairShare", Weights: map[string]float64{"a": 5000}}, "weights.a", "at most 1000"},
		{api.QueuePolicy{Kind: "FairShare", UsageHalfLife: "PT10S"}, "usageHalfLife", "between 1 minute and 365 days"},
		{api.QueuePolicy{Kind: "FairShare", UsageHalfLife: "soon"}, "usageHalfLife", "not an ISO-8601 duration"},
		{api.QueuePolicy{Kind: "FairShare", Preemption: "always"}, "preemption", "not one of None, LowerPriority, OverShare"},
		{api.QueuePolicy{Kind: "FairShare", MinRuntime: "PT5M"}, "minRuntime", "only with preemption"},
		{api.QueuePolicy{Kind: "FairShare", Preemption: "OverShare", MinRuntime: "PT0.5S"}, "minRuntime", "between 1 second and 7 days"},
	}
	for _, c := range bad {
		comp := valCompute()
		p := c.in
		comp.Aml().QueuePolicy = &p
		e := wantAPIError(t, api.PrepareCompute(comp, "shared", nil, defLoc), api.CodeValidationError, tgtQueue+c.target)
		if !strings.Contains(e.Message, c.says) {
			t.Errorf("%+v: %q, want it to say %q", c.in, e.Message, c.says)
		}
	}
}

// A PATCH with a queue policy replaces it and checks it.
func TestApplyUpdateQueuePolicy(t *testing.T) {
	comp := valCompute()
	if err := api.PrepareCompute(comp, "shared", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	if err := api.ApplyUpdate(comp, &api.ClusterUpdateProperties{QueuePolicy: &api.QueuePolicy{Kind: "FairShare", FairShareBy: "tag:team"}}); err != nil {
		t.Fatal(err)
	}
	q := comp.Queue()
	if !q.FairShare || q.Tag() != "team" || q.HalfLife != 24*time.Hour || q.Preemption != api.PreemptNone {
		t.Errorf("queue after PATCH %+v", q)
	}
	err := api.ApplyUpdate(comp, &api.ClusterUpdateProperties{QueuePolicy: &api.QueuePolicy{Kind: "Fifo", Preemption: "OverShare"}})
	wantAPIError(t, err, api.CodeValidationError, tgtQueue+"preemption")
}

// A job's group is its submitter's principal or its tag's value; a job may
// ask for its own minimum runtime, from a second to an hour.
func TestQueueGroupsAndJobMinRuntime(t *testing.T) {
	j := api.Job{SystemData: &api.SystemData{CreatedBy: "alice"}}
	j.Properties.Tags = map[string]string{"team": "vision"}
	byPrincipal := api.Queue{FairShare: true, By: "principal"}
	byTag := api.Queue{FairShare: true, By: "tag:team"}
	if g := byPrincipal.GroupOf(&j); g != "alice" {
		t.Errorf("by principal: %q", g)
	}
	if g := byTag.GroupOf(&j); g != "vision" {
		t.Errorf("by tag: %q", g)
	}
	j.Properties.Tags = nil
	if g, name := byTag.GroupOf(&j), byTag.GroupName(""); g != "" || name != "(no team tag)" {
		t.Errorf("untagged: %q shown as %q", g, name)
	}
	if g := (api.Queue{}).GroupOf(&j); g != "" {
		t.Errorf("FIFO: %q", g)
	}
	for rt, ok := range map[string]bool{"PT30M": true, "PT1H": true, "PT10S": true, "PT2H": false, "PT0.5S": false, "x": false} {
		cmd := api.Job{Properties: api.JobProperties{Command: "true", ComputeID: "c", MinRuntime: rt}}
		err := api.PrepareJob(&cmd, "j1")
		if ok != (err == nil) {
			t.Errorf("minRuntime %s: %v", rt, err)
		}
	}
}

// Where a group stands, in the words its queued jobs and the compute show.
func TestShareWords(t *testing.T) {
	var c api.Compute
	c.Aml().QueuePolicy = &api.QueuePolicy{Kind: "FairShare", FairShareBy: "tag:team"}
	for _, tc := range []struct {
		b    api.Block
		want string
	}{
		{api.Block{Kind: api.BlockShare, Group: "team-a", Nodes: 6, Share: 4}, "team-a is over its share: 6 of 4 nodes"},
		{api.Block{Kind: api.BlockShare, Group: "team-a", Nodes: 2, Share: 4, Recent: 7.25}, "team-a used more than its share lately: 7.3 of 4 nodes on average"},
		{api.Block{Kind: api.BlockShare, Group: "", Nodes: 1, Share: 2.5}, "(no team tag) is within its share: 1 of 2.5 nodes"},
	} {
		if got := tc.b.ForJob(&c); got != "waiting for nodes: "+tc.want+"; jobs of the groups furthest below their share start first" {
			t.Errorf("ForJob = %q, want %q…", got, tc.want)
		}
		if got := (api.Blocks{tc.b}).ForCompute(&c); got != tc.want {
			t.Errorf("ForCompute = %q, want %q", got, tc.want)
		}
	}
}
