package lifecycle_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Evict records a preemption notice: a node without a job is preempted at
// once, one with a job keeps its state (the agent stops the job within
// the grace period and reports). Nodes already unusable cannot be
// evicted; a node already evicted or preempted is left as it is.
func TestEvict(t *testing.T) {
	notice := "preempted at " + at(5).Format(time.RFC3339)
	for _, tc := range []struct {
		state, job string
		wantState  string
		wantErr    error
	}{
		{api.NodeIdle, "", api.NodePreempted, nil},
		{api.NodePreparing, "", api.NodePreempted, nil},
		{api.NodeLeaving, "", api.NodePreempted, nil},
		{api.NodeRunning, "j", api.NodeRunning, nil},
		{api.NodeLeaving, "j", api.NodeLeaving, nil},
		{api.NodeUnusable, "", api.NodeUnusable, lifecycle.ErrNotEvictable},
	} {
		t.Run(fmt.Sprintf("%s with job %q", tc.state, tc.job), func(t *testing.T) {
			w := newWorld(t)
			w.node("n", tc.state, tc.job)
			var got store.Node
			err := w.do(func(q store.Querier) (err error) {
				got, err = lifecycle.Evict(w.ctx, q, "n", at(5))
				return err
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Evict = %v; want %v", err, tc.wantErr)
			}
			n := w.getNode("n")
			wantNode(t, n, tc.wantState, tc.job)
			if tc.wantErr != nil {
				if !n.Evicted.IsZero() || n.Reason != "" {
					t.Errorf("a refused eviction was recorded: %v %q", n.Evicted, n.Reason)
				}
				return
			}
			if !n.Evicted.Equal(at(5)) || n.Reason != notice {
				t.Errorf("evicted %v %q; want %v %q", n.Evicted, n.Reason, at(5), notice)
			}
			if got.State != n.State || !got.Evicted.Equal(n.Evicted) {
				t.Errorf("Evict returned %+v; the store holds %+v", got, n)
			}
		})
	}

	t.Run("twice", func(t *testing.T) {
		w := newWorld(t)
		w.node("n", api.NodeRunning, "j")
		for _, when := range []int{5, 6} {
			w.must(func(q store.Querier) error { _, err := lifecycle.Evict(w.ctx, q, "n", at(when)); return err })
		}
		if n := w.getNode("n"); !n.Evicted.Equal(at(5)) || n.Reason != notice {
			t.Errorf("a second notice moved the first: %v %q", n.Evicted, n.Reason)
		}
	})
	t.Run("already preempted", func(t *testing.T) {
		w := newWorld(t)
		w.node("n", api.NodePreempted, "")
		w.must(func(q store.Querier) error { _, err := lifecycle.Evict(w.ctx, q, "n", at(5)); return err })
		if n := w.getNode("n"); !n.Evicted.IsZero() || n.State != api.NodePreempted {
			t.Errorf("evicting a preempted node changed it: %+v", n)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		w := newWorld(t)
		err := w.do(func(q store.Querier) error { _, err := lifecycle.Evict(w.ctx, q, "ghost", at(5)); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Evict of an unknown node = %v; want store.ErrNotFound", err)
		}
	})
}

// A preempted node's job goes back to the queue without using a retry.
func TestPreemptedRequeuesTheJob(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.must(func(q store.Querier) error { _, err := lifecycle.Evict(w.ctx, q, nodes[1], at(4)); return err })
	w.must(func(q store.Querier) error {
		return lifecycle.Preempted(w.ctx, q, nodes[1], lifecycle.DefaultMaxPreemptions, at(5))
	})
	j := w.job("j")
	wantJob(t, j, api.JobQueued, "preempted on node j-node-2; queued again")
	if j.Preemptions != 1 || j.Attempt != 1 || len(j.Nodes) != 0 {
		t.Errorf("preemptions %d, attempt %d, nodes %v; want 1, 1, none", j.Preemptions, j.Attempt, j.Nodes)
	}
	if a := lastAttempt(t, j); a.Ended == nil || !a.Ended.Equal(at(5)) || a.Reason != "preempted on node j-node-2" {
		t.Errorf("attempt = %+v", a)
	}
	wantNode(t, w.getNode(nodes[1]), api.NodePreempted, "")
	wantNode(t, w.getNode(nodes[0]), api.NodeRunning, "j") // stops at its next poll

	// A second report of the same preemption changes nothing more.
	w.must(func(q store.Querier) error {
		return lifecycle.Preempted(w.ctx, q, nodes[1], lifecycle.DefaultMaxPreemptions, at(6))
	})
	if again := w.job("j"); again.Version != j.Version || again.Preemptions != 1 {
		t.Errorf("a repeated preemption counted again: %d", again.Preemptions)
	}
}

// A job preempted maxPreemptions times fails; 0 never gives up.
func TestPreemptedBoundsRestarts(t *testing.T) {
	for _, max := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("max %d", max), func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			runs := max
			if max == 0 {
				runs = 12 // more than DefaultMaxPreemptions
			}
			for i := 1; i <= runs; i++ {
				node := fmt.Sprintf("spot-%d", i)
				w.node(node, api.NodeIdle, "")
				w.assign("j", []string{node}, at(10*i))
				w.started("j", at(10*i+1))
				w.must(func(q store.Querier) error { return lifecycle.Preempted(w.ctx, q, node, max, at(10*i+2)) })
				j := w.job("j")
				if j.Preemptions != i {
					t.Fatalf("preemption %d counted as %d", i, j.Preemptions)
				}
				wantNode(t, w.getNode(node), api.NodePreempted, "")
				reason := "preempted on node " + node
				if i < max || max == 0 {
					wantJob(t, j, api.JobQueued, reason+"; queued again")
					continue
				}
				wantJob(t, j, api.JobFailed, fmt.Sprintf("%s; preempted %d times, giving up", reason, max))
				if a := lastAttempt(t, j); a.Ended == nil || a.Reason != reason || len(j.Nodes) != 0 {
					t.Errorf("attempt = %+v, nodes %v; want ended with the reason, no nodes", a, j.Nodes)
				}
			}
		})
	}
}

// A job asked to cancel ends Canceled when its node is preempted, also
// when that preemption is the one that would make it give up.
func TestPreemptedAfterCancelRequest(t *testing.T) {
	for _, max := range []int{1, lifecycle.DefaultMaxPreemptions} {
		t.Run(fmt.Sprintf("max %d", max), func(t *testing.T) {
			w := newWorld(t)
			_, nodes := w.running("j", 1)
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(4)) })
			w.must(func(q store.Querier) error { return lifecycle.Preempted(w.ctx, q, nodes[0], max, at(5)) })
			j := w.job("j")
			wantJob(t, j, api.JobCanceled, "canceled by request")
			if a := lastAttempt(t, j); a.Ended == nil || a.Reason != "preempted on node j-node-1" {
				t.Errorf("attempt = %+v", a)
			}
			wantNode(t, w.getNode(nodes[0]), api.NodePreempted, "")
		})
	}
}

// Preempted on a node without a job, or one whose job does not run there
// any more, only marks the node; an unknown node is no error.
func TestPreemptedWithoutAJob(t *testing.T) {
	w := newWorld(t)
	w.node("free", api.NodeIdle, "")
	w.running("j", 1)
	w.exited("j", "j-node-1", 0, "", at(3))
	w.node("j-node-1", api.NodeRunning, "j") // a record the release missed
	done := w.job("j")
	for _, id := range []string{"free", "j-node-1", "ghost"} {
		w.must(func(q store.Querier) error { return lifecycle.Preempted(w.ctx, q, id, 1, at(5)) })
	}
	wantNode(t, w.getNode("free"), api.NodePreempted, "")
	wantNode(t, w.getNode("j-node-1"), api.NodePreempted, "")
	if j := w.job("j"); j.Version != done.Version || j.Preemptions != 0 {
		t.Errorf("the completed job changed: %s, %d preemptions", j.Doc.Properties.Status, j.Preemptions)
	}
}
