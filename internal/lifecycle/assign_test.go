package lifecycle_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A queued job given as many idle nodes as it needs starts its first
// attempt: Preparing, attempt 1 on those nodes by rank, each node running
// it.
func TestAssignStartsAnAttempt(t *testing.T) {
	w := newWorld(t)
	w.queued("j", 2)
	nodes := w.idleNodes("n", 2)
	j := w.assign("j", []string{nodes[1], nodes[0]}, at(1))

	if got := w.job("j"); got.Version != j.Version {
		t.Errorf("Assign returned version %d; the store holds %d", j.Version, got.Version)
	}
	j = w.job("j")
	wantJob(t, j, api.JobPreparing, "")
	if j.Attempt != 1 || !slices.Equal(j.Nodes, []string{"n-2", "n-1"}) {
		t.Errorf("attempt %d on %v; want attempt 1 on [n-2 n-1] (the ranks given)", j.Attempt, j.Nodes)
	}
	a := lastAttempt(t, j)
	if a.Number != 1 || !slices.Equal(a.Nodes, j.Nodes) || a.Started != nil || a.Ended != nil {
		t.Errorf("attempt record = %+v; want number 1 on the job's nodes, not started", a)
	}
	if h := j.Doc.Properties.History; !h[len(h)-1].Time.Equal(at(1)) {
		t.Errorf("Preparing recorded at %v; want %v", h[len(h)-1].Time, at(1))
	}
	for _, id := range nodes {
		wantNode(t, w.getNode(id), api.NodeRunning, "j")
	}
}

// Assign refuses (ErrStale) a job that is not queued, in every other
// status, and changes neither the job nor the node.
func TestAssignRefusesAJobThatIsNotQueued(t *testing.T) {
	for _, status := range api.JobStatuses {
		if status == api.JobQueued {
			continue
		}
		t.Run(status, func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			before := w.setStatus("j", status)
			w.node("n", api.NodeIdle, "")
			err := w.do(func(q store.Querier) error {
				_, err := lifecycle.Assign(w.ctx, q, "j", []string{"n"}, at(5))
				return err
			})
			if !errors.Is(err, lifecycle.ErrStale) {
				t.Fatalf("Assign of a %s job = %v; want ErrStale", status, err)
			}
			j := w.job("j")
			if j.Version != before.Version || j.Attempt != 0 || j.Doc.Properties.Status != status {
				t.Errorf("the refused job changed: %s attempt %d version %d", j.Doc.Properties.Status, j.Attempt, j.Version)
			}
			wantNode(t, w.getNode("n"), api.NodeIdle, "")
		})
	}
}

// Assign refuses (ErrStale) node sets that do not fit: the wrong number,
// a node named twice or unknown, or one that is no longer idle and free.
// Nothing is claimed when one node of the set fails.
func TestAssignRefusesNodesThatDoNotFit(t *testing.T) {
	type other struct{ state, job string }
	for _, tc := range []struct {
		name  string
		nodes []string
		other *other // the state of node "x"
	}{
		{name: "too few nodes", nodes: []string{"n"}},
		{name: "too many nodes", nodes: []string{"n", "x", "y"}, other: &other{api.NodeIdle, ""}},
		{name: "a node named twice", nodes: []string{"n", "n"}},
		{name: "an unknown node", nodes: []string{"n", "ghost"}},
		{name: "a preparing node", nodes: []string{"n", "x"}, other: &other{api.NodePreparing, ""}},
		{name: "a running node", nodes: []string{"n", "x"}, other: &other{api.NodeRunning, "other-job"}},
		{name: "an idle node still holding a job", nodes: []string{"n", "x"}, other: &other{api.NodeIdle, "other-job"}},
		{name: "a leaving node", nodes: []string{"n", "x"}, other: &other{api.NodeLeaving, ""}},
		{name: "a preempted node", nodes: []string{"n", "x"}, other: &other{api.NodePreempted, ""}},
		{name: "an unusable node", nodes: []string{"n", "x"}, other: &other{api.NodeUnusable, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 2)
			w.node("n", api.NodeIdle, "")
			w.node("y", api.NodeIdle, "")
			if tc.other != nil {
				w.node("x", tc.other.state, tc.other.job)
			}
			err := w.do(func(q store.Querier) error {
				_, err := lifecycle.Assign(w.ctx, q, "j", tc.nodes, at(1))
				return err
			})
			if !errors.Is(err, lifecycle.ErrStale) {
				t.Fatalf("Assign(%v) = %v; want ErrStale", tc.nodes, err)
			}
			wantJob(t, w.job("j"), api.JobQueued, "")
			if j := w.job("j"); j.Attempt != 0 || len(j.Nodes) != 0 {
				t.Errorf("the refused job has attempt %d on %v", j.Attempt, j.Nodes)
			}
			wantNode(t, w.getNode("n"), api.NodeIdle, "")
			wantNode(t, w.getNode("y"), api.NodeIdle, "")
			if tc.other != nil {
				wantNode(t, w.getNode("x"), tc.other.state, tc.other.job)
			}
		})
	}
}

func TestAssignUnknownJob(t *testing.T) {
	w := newWorld(t)
	w.node("n", api.NodeIdle, "")
	err := w.do(func(q store.Querier) error {
		_, err := lifecycle.Assign(w.ctx, q, "nobody", []string{"n"}, at(1))
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Assign of an unknown job = %v; want store.ErrNotFound", err)
	}
	wantNode(t, w.getNode("n"), api.NodeIdle, "")
}

// A requeued job's next assignment is a new attempt: the number goes up,
// the exits of the last attempt are forgotten, the history of attempts
// is kept.
func TestAssignAgainAfterRequeue(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.exited("j", nodes[0], 0, "", at(3)) // one rank finished before the other node was lost
	w.lost(nodes[1], "no heartbeat", lifecycle.DefaultMaxAttempts, at(4))
	wantJob(t, w.job("j"), api.JobQueued, "no heartbeat; queued again")

	fresh := w.idleNodes("m", 2)
	j := w.assign("j", fresh, at(5))
	wantJob(t, j, api.JobPreparing, "")
	if j.Attempt != 2 || len(j.Exits) != 0 || !slices.Equal(j.Nodes, fresh) {
		t.Errorf("attempt %d on %v, exits %v; want attempt 2 on %v with no exits", j.Attempt, j.Nodes, j.Exits, fresh)
	}
	as := j.Doc.Properties.Attempts
	if len(as) != 2 || as[0].Number != 1 || as[0].Ended == nil || as[1].Number != 2 || as[1].Ended != nil {
		t.Errorf("attempts = %+v; want 1 (ended) then 2 (open)", as)
	}
}
