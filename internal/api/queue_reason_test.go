package api

import (
	"strings"
	"testing"
)

// A queued job's reason comes from its cluster's status: at max, a job too
// big for max (named by its ARM name, not the store's uid), provisioning
// failing or preparing, the cluster growing; nothing when it says nothing.
func TestQueueReason(t *testing.T) {
	comp := func(state string, errs ...ErrorResponse) Compute {
		var c Compute
		a := c.Aml()
		a.AllocationState, a.Errors, a.CurrentNodeCount, a.TargetNodeCount = state, errs, 1, 2
		return c
	}
	e := func(code, msg string) ErrorResponse { return ErrorResponse{Error: &Error{Code: code, Message: msg}} }
	for _, c := range []struct {
		c    Compute
		want string
	}{
		{comp(AllocationSteady, e("ScaleUpBlocked", "queued jobs wait: at maxNodeCount 2")), "waiting for nodes: the cluster is at its maximum of 2 nodes"},
		{comp(AllocationSteady, e("ScaleUpBlocked", "queued jobs wait: at maxNodeCount 0, set by schedule \"nights\" until 07:00")),
			"waiting for nodes: the cluster is at its maximum of 0 nodes (max_instances) (set by schedule \"nights\" until 07:00); the job starts"},
		{comp(AllocationSteady, e("ScaleUpBlocked", "queued jobs wait: job uid-1 needs 4 nodes, more than maxNodeCount 2")), "waiting for nodes: job big needs 4 nodes, more than maxNodeCount 2; raise max_instances"},
		{comp(AllocationSteady, e("ScaleUpBlocked", "queued jobs wait: job uid-9 needs 4 nodes, more than maxNodeCount 2")), ""},
		{comp(AllocationResizing, e("NodeProvisioningFailed", "docker: no such image")), "waiting for nodes: node provisioning fails and is retried: docker: no such image"},
		{comp(AllocationResizing, e("NodeNotReady", "tvm-1: pulling image python:3.11")), "waiting for nodes: a node is being prepared (tvm-1: pulling image python:3.11)"},
		{comp(AllocationResizing), "waiting for nodes: the cluster is growing"},
		{comp(AllocationSteady), ""},
		{func() Compute { c := comp(AllocationResizing); c.Aml().TargetNodeCount = 0; return c }(), ""}, // shrinking
	} {
		got := QueueReason(c.c, "big", "uid-1")
		if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("QueueReason(%+v) = %q, want %q…", c.c.Aml().Errors, got, c.want)
		}
	}
}
