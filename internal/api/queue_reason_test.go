package api

import (
	"strings"
	"testing"
	"time"
)

// A queued job's reason: its own (quota), else its cluster's reasons as
// values — at max (naming the schedule that set it), a job too big for max
// (this job only, named by its ARM name), the provider backing off, a
// budget — else the compute's state (a node preparing, the cluster growing);
// nothing when nothing says.
func TestQueueReason(t *testing.T) {
	comp := func(state string, blocks Blocks, errs ...ErrorResponse) Compute {
		var c Compute
		a := c.Aml()
		a.AllocationState, a.Blocked, a.Errors, a.CurrentNodeCount, a.TargetNodeCount = state, blocks, errs, 1, 2
		return c
	}
	since := time.Date(2026, 11, 2, 20, 0, 0, 0, time.UTC)
	nights := comp(AllocationSteady, Blocks{{Kind: BlockAtMax, Max: 0, Schedule: "nights"}})
	nights.Aml().ActiveSchedule = &ActiveSchedule{Name: "nights", Since: since, MaxNodeCount: 0}
	e := func(code, msg string) ErrorResponse { return ErrorResponse{Error: &Error{Code: code, Message: msg}} }
	var own Job
	own.Properties.Waiting = &Block{Kind: BlockQuota, Quota: &QuotaNeed{Location: "westus", Family: "standardDSv2Family", Quota: "standardDSv2Family", Cores: 4, Free: 0, Limit: 8}}
	for _, c := range []struct {
		c    Compute
		j    Job
		want string
	}{
		{comp(AllocationSteady, Blocks{{Kind: BlockAtMax, Max: 2}}), Job{}, "waiting for nodes: the cluster is at its maximum of 2 nodes (max_instances); the job starts"},
		{nights, Job{}, `waiting for nodes: the cluster is at its maximum of 0 nodes (max_instances) (set by schedule "nights" (minNodeCount 0, maxNodeCount 0 since Mon 2026-11-02 20:00 UTC)); the job starts`},
		{comp(AllocationSteady, Blocks{{Kind: BlockTooBig, Job: "uid-1", JobName: "big", Need: 4, Max: 2}}), Job{}, "waiting for nodes: job big needs 4 nodes, more than maxNodeCount 2; raise max_instances"},
		{comp(AllocationSteady, Blocks{{Kind: BlockTooBig, Job: "uid-9", JobName: "other", Need: 4, Max: 2}}), Job{}, ""},
		{comp(AllocationSteady, Blocks{{Kind: BlockQuota, Allowed: 0}}), Job{}, ""},
		{comp(AllocationSteady, Blocks{{Kind: BlockAtMax, Max: 3}, {Kind: BlockQuota, Allowed: 0}}), own, "waiting for quota: standardDSv2Family needs 4 more cores, 0 of 8 free in location westus"},
		{comp(AllocationResizing, Blocks{{Kind: BlockBackoff, Message: "docker: no such image"}}), Job{}, "waiting for nodes: node provisioning fails and is retried: docker: no such image"},
		{comp(AllocationSteady, Blocks{{Kind: BlockBudget, Budget: &BudgetHold{Name: "team", Percent: 100, Amount: 50, Currency: "USD", Period: "Monthly"}}}), Job{},
			"waiting for budget: budget team reached 100 % of 50.00 USD this monthly"},
		{comp(AllocationResizing, nil, e(CodeNodeNotReady, "tvm-1: pulling image python:3.11")), Job{}, "waiting for nodes: a node is being prepared (tvm-1: pulling image python:3.11)"},
		{comp(AllocationResizing, nil), Job{}, "waiting for nodes: the cluster is growing"},
		{comp(AllocationSteady, nil), Job{}, ""},
		{func() Compute { c := comp(AllocationResizing, nil); c.Aml().TargetNodeCount = 0; return c }(), Job{}, ""}, // shrinking
		// Fair share: where the job's own group stands, not another's.
		{comp(AllocationSteady, Blocks{{Kind: BlockAtMax, Max: 4}, {Kind: BlockShare, Group: "alice", Nodes: 3, Share: 2}, {Kind: BlockShare, Group: "bob", Nodes: 1, Share: 2}}), inGroup("bob"),
			"waiting for nodes: the cluster is at its maximum of 4 nodes (max_instances); the job starts when nodes free up; bob is within its share: 1 of 2 nodes; jobs of the groups"},
		{comp(AllocationSteady, Blocks{{Kind: BlockShare, Group: "alice", Nodes: 3, Share: 2}}), inGroup("alice"), "waiting for nodes: alice is over its share: 3 of 2 nodes"},
		{comp(AllocationSteady, Blocks{{Kind: BlockShare, Group: "alice", Nodes: 3, Share: 2}}), Job{}, ""},
	} {
		got := QueueReason(c.c, &c.j, "uid-1")
		if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("QueueReason(%+v) = %q, want %q…", c.c.Aml().Blocked, got, c.want)
		}
	}
}

// inGroup is a job of fair-share group g.
func inGroup(g string) Job {
	var j Job
	j.Properties.FairShareGroup = &g
	return j
}
