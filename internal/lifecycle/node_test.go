package lifecycle_test

import (
	"fmt"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A node lost while it ran a job becomes unusable with the reason, and
// the job goes back to the queue: its attempt ends with the reason, it
// holds no node.
func TestNodeLostRequeuesTheJob(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.lost(nodes[0], "no heartbeat for 60s", lifecycle.DefaultMaxAttempts, at(5))

	n := w.getNode(nodes[0])
	wantNode(t, n, api.NodeUnusable, "")
	if n.Reason != "no heartbeat for 60s" {
		t.Errorf("node reason = %q", n.Reason)
	}
	j := w.job("j")
	wantJob(t, j, api.JobQueued, "no heartbeat for 60s; queued again")
	if len(j.Nodes) != 0 || len(j.Exits) != 0 || j.Attempt != 1 {
		t.Errorf("requeued job: attempt %d on %v exits %v; want attempt 1 on no node", j.Attempt, j.Nodes, j.Exits)
	}
	if a := lastAttempt(t, j); a.Ended == nil || !a.Ended.Equal(at(5)) || a.Reason != "no heartbeat for 60s" || a.ExitCode != nil {
		t.Errorf("attempt = %+v; want ended at %v with the reason and no exit code", a, at(5))
	}
	if j.Doc.Properties.EndTime != nil {
		t.Errorf("a requeued job has an end time %v", j.Doc.Properties.EndTime)
	}
	// The job's other node keeps it until its agent reports its part
	// stopped; then it is free.
	wantNode(t, w.getNode(nodes[1]), api.NodeRunning, "j")
	w.must(func(q store.Querier) error {
		return lifecycle.Exited(w.ctx, q, w.job("j"), nodes[1], 1, 143, "canceled", at(6))
	})
	wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
	wantJob(t, w.job("j"), api.JobQueued, "no heartbeat for 60s; queued again")
}

// A job whose node is lost again and again is requeued until it has been
// started maxAttempts times; then it fails, saying why. maxAttempts 0
// never gives up.
func TestNodeLostBoundsRestarts(t *testing.T) {
	for _, max := range []int{0, 1, 2, lifecycle.DefaultMaxAttempts} {
		t.Run(fmt.Sprintf("max %d", max), func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			runs := max
			if max == 0 {
				runs = 6
			}
			for attempt := 1; attempt <= runs; attempt++ {
				node := fmt.Sprintf("n-%d", attempt)
				w.node(node, api.NodeIdle, "")
				w.assign("j", []string{node}, at(10*attempt))
				w.started("j", at(10*attempt+1))
				w.lost(node, "the machine stopped answering", max, at(10*attempt+2))
				j := w.job("j")
				if j.Attempt != attempt {
					t.Fatalf("attempt %d recorded as %d", attempt, j.Attempt)
				}
				wantNode(t, w.getNode(node), api.NodeUnusable, "")
				if attempt < max || max == 0 {
					wantJob(t, j, api.JobQueued, "the machine stopped answering; queued again")
					continue
				}
				wantJob(t, j, api.JobFailed, fmt.Sprintf("the machine stopped answering; gave up after %d attempts", max))
				if et := j.Doc.Properties.EndTime; et == nil || !et.Equal(at(10*attempt+2)) {
					t.Errorf("end time = %v", et)
				}
				if len(j.Doc.Properties.Attempts) != max || lastAttempt(t, j).Ended == nil {
					t.Errorf("attempts = %+v; want %d, all ended", j.Doc.Properties.Attempts, max)
				}
			}
		})
	}
}

// Attempts that ended in a preemption do not count against the retries.
func TestNodeLostDoesNotCountPreemptions(t *testing.T) {
	w := newWorld(t)
	w.queued("j", 1)
	for i := 1; i <= 2; i++ { // two attempts preempted
		node := fmt.Sprintf("spot-%d", i)
		w.node(node, api.NodeIdle, "")
		w.assign("j", []string{node}, at(10*i))
		w.must(func(q store.Querier) error {
			return lifecycle.Preempted(w.ctx, q, node, lifecycle.DefaultMaxPreemptions, at(10*i+1))
		})
	}
	w.node("n", api.NodeIdle, "")
	w.assign("j", []string{"n"}, at(30))
	w.lost("n", "no heartbeat", 2, at(31)) // attempt 3, the first that counts
	j := w.job("j")
	wantJob(t, j, api.JobQueued, "no heartbeat; queued again")
	if j.Attempt != 3 || j.Preemptions != 2 {
		t.Errorf("attempt %d, preemptions %d; want 3 and 2", j.Attempt, j.Preemptions)
	}

	w.node("m", api.NodeIdle, "")
	w.assign("j", []string{"m"}, at(40))
	w.lost("m", "no heartbeat", 2, at(41))
	wantJob(t, w.job("j"), api.JobFailed, "no heartbeat; gave up after 2 attempts")
}

// A cancel requested of a job whose node is then lost ends it Canceled,
// not queued again nor failed, even on its last attempt.
func TestNodeLostAfterCancelRequest(t *testing.T) {
	for _, max := range []int{1, lifecycle.DefaultMaxAttempts} {
		t.Run(fmt.Sprintf("max %d", max), func(t *testing.T) {
			w := newWorld(t)
			_, nodes := w.running("j", 1)
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(4)) })
			w.lost(nodes[0], "no heartbeat", max, at(5))
			j := w.job("j")
			wantJob(t, j, api.JobCanceled, "canceled by request")
			if a := lastAttempt(t, j); a.Reason != "no heartbeat" || a.Ended == nil {
				t.Errorf("attempt = %+v; want ended with the node's loss", a)
			}
			wantNode(t, w.getNode(nodes[0]), api.NodeUnusable, "")
		})
	}
}

// A lost node whose job does not run there any more (the job ended, or
// moved on to a new attempt elsewhere, or is gone) only becomes unusable.
func TestNodeLostLeavesOtherJobsAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world) string // returns the node to lose
	}{
		{"no job", func(w *world) string { w.node("n", api.NodeIdle, ""); return "n" }},
		{"its job completed", func(w *world) string {
			w.running("j", 2)
			w.exited("j", "j-node-1", 0, "", at(3))
			w.exited("j", "j-node-2", 0, "", at(3))
			w.node("j-node-1", api.NodeRunning, "j") // a record the release missed
			return "j-node-1"
		}},
		{"its job moved on", func(w *world) string {
			_, nodes := w.running("j", 2)
			w.lost(nodes[0], "no heartbeat", 3, at(3))
			w.assign("j", w.idleNodes("m", 2), at(4))
			return nodes[1] // still holds the job from attempt 1
		}},
		{"its job is gone", func(w *world) string {
			w.running("j", 1)
			if err := store.DeleteJob(w.ctx, w.db.W(), "j"); err != nil {
				w.t.Fatal(err)
			}
			return "j-node-1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			id := tc.setup(w)
			before, _ := store.GetJobByUID(w.ctx, w.db.Q(), "j")
			w.lost(id, "disk failure", 3, at(9))
			n := w.getNode(id)
			wantNode(t, n, api.NodeUnusable, "")
			if n.Reason != "disk failure" {
				t.Errorf("node reason = %q", n.Reason)
			}
			if after, err := store.GetJobByUID(w.ctx, w.db.Q(), "j"); err == nil && after.Version != before.Version {
				t.Errorf("the job changed: %s %q", after.Doc.Properties.Status, after.Doc.Properties.StatusMessage)
			}
		})
	}
}

// A machine gone from outside Cumulus: on a dedicated cluster the node is
// unusable and the retry is used up; on a low-priority cluster it is a
// preemption, which does not use one.
func TestMachineGone(t *testing.T) {
	for _, tc := range []struct {
		priority  string
		nodeState string
		msg       string
		prempts   int
	}{
		{api.PriorityDedicated, api.NodeUnusable, "pod deleted; gave up after 1 attempts", 0},
		{api.PriorityLowPriority, api.NodePreempted, "preempted on node n; queued again", 1},
	} {
		t.Run(tc.priority, func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			n := w.node("n", api.NodeIdle, "")
			n.Priority = tc.priority
			if err := store.PutNode(w.ctx, w.db.W(), n); err != nil {
				t.Fatal(err)
			}
			w.assign("j", []string{"n"}, at(1))
			w.started("j", at(2))
			w.must(func(q store.Querier) error {
				return lifecycle.MachineGone(w.ctx, q, w.getNode("n"), "pod deleted", 1, lifecycle.DefaultMaxPreemptions, at(3))
			})
			j := w.job("j")
			status := api.JobQueued
			if tc.priority == api.PriorityDedicated {
				status = api.JobFailed // one attempt allowed, and used
			}
			wantJob(t, j, status, tc.msg)
			if j.Preemptions != tc.prempts {
				t.Errorf("preemptions = %d; want %d", j.Preemptions, tc.prempts)
			}
			wantNode(t, w.getNode("n"), tc.nodeState, "")
		})
	}
}
