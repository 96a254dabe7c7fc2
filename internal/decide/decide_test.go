package decide

import (
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const timeout = 10 * time.Minute

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
		now  time.Time
		want Plan
	}{
		// Growing.
		{
			name: "scale from zero up to max",
			c:    Cluster{Min: 0, Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a", "b", "c")},
			now:  t0,
			want: Plan{Create: 2, Target: 2, Blocked: api.Blocks{atMax(2)}},
		},
		{
			name: "scale from zero for a gang job",
			c:    Cluster{Max: 10, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 3, 1)}},
			now:  t0,
			want: Plan{Create: 3, Target: 3},
		},
		{
			name: "queue at max: jobs wait, nothing created",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("c"), Nodes: []Node{
				runningNode("r1", "a", t0), runningNode("r2", "b", t0),
			}},
			now:  t0,
			want: Plan{Target: 2, Blocked: api.Blocks{atMax(2)}},
		},
		{
			name: "preparing nodes count toward demand",
			c: Cluster{Max: 5, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a", "b", "c"), Nodes: []Node{
				preparingNode("p1", t0), preparingNode("p2", t0),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Create: 1, Target: 3},
		},
		{
			name: "preparing nodes cover all demand",
			c: Cluster{Max: 5, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				preparingNode("p1", t0), preparingNode("p2", t0),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Target: 2},
		},
		{
			name: "queued work starts on idle nodes and the rest is created",
			c: Cluster{Max: 5, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a", "b", "c"), Nodes: []Node{
				idleNode("i1", t0),
			}},
			now: t0.Add(time.Minute),
			want: Plan{
				Assign: []Assignment{{JobID: "a", NodeIDs: []string{"i1"}}},
				Create: 2, Target: 3,
			},
		},
		{
			name: "quota headroom limits creates",
			c:    Cluster{Max: 10, IdleTimeout: timeout, Headroom: 2, Queued: jobs("a", "b", "c", "d", "e")},
			now:  t0,
			want: Plan{Create: 2, Target: 2, Blocked: api.Blocks{quotaAllows(2)},
				QuotaShort: 3, QuotaWait: []Wait{{"c", 1}, {"d", 1}, {"e", 1}}},
		},
		{
			name: "no quota left",
			c:    Cluster{Max: 10, IdleTimeout: timeout, Headroom: 0, Queued: jobs("a")},
			now:  t0,
			want: Plan{Blocked: api.Blocks{quotaAllows(0)}, QuotaShort: 1, QuotaWait: []Wait{{"a", 1}}},
		},
		{
			name: "headroom larger than needed does not limit",
			c:    Cluster{Max: 10, IdleTimeout: timeout, Headroom: 7, Queued: jobs("a")},
			now:  t0,
			want: Plan{Create: 1, Target: 1},
		},
		{
			name: "both max and quota block",
			c:    Cluster{Max: 2, IdleTimeout: timeout, Headroom: 1, Queued: jobs("a", "b", "c")},
			now:  t0,
			// b waits for quota; c waits for maxNodeCount.
			want: Plan{Create: 1, Target: 1, Blocked: api.Blocks{atMax(2), quotaAllows(1)}, QuotaShort: 1, QuotaWait: []Wait{{"b", 1}}},
		},
		{
			name: "job bigger than max is not grown for",
			c:    Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("big", 5, 1)}},
			now:  t0,
			want: Plan{Blocked: api.Blocks{tooBig("big", 5, 2)}},
		},
		{
			name: "job bigger than max does not hold back the jobs behind it",
			c:    Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("big", 5, 1), gang("small", 1, 2)}},
			now:  t0,
			want: Plan{Create: 1, Target: 1, Blocked: api.Blocks{tooBig("big", 5, 2)}},
		},

		// Gang jobs.
		{
			name: "waiting gang job keeps its reserved idle nodes past their timeout",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 4, 1)}, Nodes: []Node{
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Create: 2, Target: 4},
		},
		{
			name: "waiting gang job at max keeps its reserved idle nodes",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 3, 1)}, Nodes: []Node{
				runningNode("r1", "x", t0), idleNode("i1", t0), idleNode("i2", t0),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Target: 3, Blocked: api.Blocks{atMax(3)}},
		},
		{
			name: "waiting gang job blocked by quota keeps its reserved idle nodes",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: 0, Queued: []Job{gang("g", 3, 1)}, Nodes: []Node{
				idleNode("i1", t0), idleNode("i2", t0),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Target: 2, Blocked: api.Blocks{quotaAllows(0)}, QuotaShort: 1, QuotaWait: []Wait{{"g", 1}}},
		},

		// Idle scale-down.
		{
			name: "idle node below its timeout is kept until it",
			c:    Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{idleNode("i1", t0)}},
			now:  t0.Add(timeout - time.Nanosecond),
			want: Plan{Target: 1, WakeAt: t0.Add(timeout)},
		},
		{
			name: "idle node exactly at its timeout is removed",
			c:    Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{idleNode("i1", t0)}},
			now:  t0.Add(timeout),
			want: Plan{Remove: []string{"i1"}},
		},
		{
			name: "race: node at its timeout that gets a job in the same pass is kept",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				idleNode("i1", t0),
			}},
			now: t0.Add(timeout),
			want: Plan{
				Assign: []Assignment{{JobID: "a", NodeIDs: []string{"i1"}}},
				Target: 1,
			},
		},
		{
			name: "idle time restarts when a node ran a job",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				{ID: "i1", State: NodeIdle, IdleSince: t0.Add(9 * time.Minute), Created: t0.Add(-time.Hour)},
			}},
			now:  t0.Add(timeout),
			want: Plan{Target: 1, WakeAt: t0.Add(19 * time.Minute)},
		},
		{
			name: "zero idle timeout removes idle nodes at once",
			c:    Cluster{Max: 3, Headroom: -1, Nodes: []Node{idleNode("i1", t0)}},
			now:  t0,
			want: Plan{Remove: []string{"i1"}},
		},
		{
			name: "min kept: only nodes above min are removed, longest idle first",
			c: Cluster{Min: 1, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				idleNode("newer", t0.Add(2*time.Minute)), idleNode("oldest", t0), idleNode("older", t0.Add(time.Minute)),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Remove: []string{"oldest", "older"}, Target: 1},
		},
		{
			name: "min kept: nothing to remove and nothing to wake for",
			c: Cluster{Min: 2, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Target: 2},
		},
		{
			name: "busy nodes count toward min",
			c: Cluster{Min: 2, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				runningNode("r1", "x", t0), idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Remove: []string{"i1"}, Target: 2},
		},

		// Max lowered, min raised.
		{
			name: "max lowered: idle removed first even before its timeout, then running drained newest first",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				runningNode("r1", "a", t0.Add(-3*time.Hour)),
				runningNode("r3", "c", t0.Add(-1*time.Hour)),
				runningNode("r2", "b", t0.Add(-2*time.Hour)),
				idleNode("i1", t0),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Remove: []string{"i1"}, Drain: []string{"r3"}, Target: 2},
		},
		{
			name: "max lowered: idle, then preparing newest first, then running",
			c: Cluster{Max: 1, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				runningNode("r1", "a", t0.Add(-3*time.Hour)),
				runningNode("r2", "b", t0.Add(-2*time.Hour)),
				preparingNode("p1", t0.Add(-time.Hour)),
				preparingNode("p2", t0.Add(-30*time.Minute)),
				idleNode("i1", t0),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Remove: []string{"i1", "p2", "p1"}, Drain: []string{"r2"}, Target: 1},
		},
		{
			name: "max lowered: queued jobs do not start on nodes being removed",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("q"), Nodes: []Node{
				runningNode("r1", "a", t0), runningNode("r2", "b", t0),
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now:  t0.Add(2 * time.Minute),
			want: Plan{Remove: []string{"i1", "i2"}, Target: 2, Blocked: api.Blocks{atMax(2)}},
		},
		{
			name: "max lowered: jobs start on the idle nodes kept",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("q"), Nodes: []Node{
				runningNode("r1", "a", t0),
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now: t0.Add(2 * time.Minute),
			want: Plan{
				Assign: []Assignment{{JobID: "q", NodeIDs: []string{"i2"}}},
				Remove: []string{"i1"}, Target: 2,
			},
		},
		{
			name: "min raised: nodes created to reach it",
			c:    Cluster{Min: 3, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{idleNode("i1", t0)}},
			now:  t0.Add(time.Hour),
			want: Plan{Create: 2, Target: 3},
		},
		{
			name: "min raised beyond quota",
			c:    Cluster{Min: 3, Max: 5, IdleTimeout: timeout, Headroom: 1},
			now:  t0,
			want: Plan{Create: 1, Target: 1, Blocked: api.Blocks{quotaAllows(1)}, QuotaShort: 2},
		},
		{
			name: "min above max counts as max",
			c:    Cluster{Min: 5, Max: 2, IdleTimeout: timeout, Headroom: -1},
			now:  t0,
			want: Plan{Create: 2, Target: 2},
		},

		// Nodes on their way out.
		{
			name: "unusable and preempted nodes removed and replaced",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Queued: jobs("b", "c"), Nodes: []Node{
				nodeIn("u1", NodeUnusable),
				runningNode("r1", "a", t0),
				{ID: "pe1", State: NodePreempted, JobID: "d", Created: t0},
			}},
			now:  t0,
			want: Plan{Remove: []string{"pe1", "u1"}, Create: 2, Target: 3},
		},
		{
			name: "unusable node removed at min and replaced",
			c: Cluster{Min: 1, Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				nodeIn("u1", NodeUnusable),
			}},
			now:  t0,
			want: Plan{Remove: []string{"u1"}, Create: 1, Target: 1},
		},
		{
			name: "leaving node removed once its job ended, not before",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				{ID: "l1", State: NodeLeaving, JobID: "a", Created: t0},
				{ID: "l2", State: NodeLeaving, Created: t0},
			}},
			now:  t0,
			want: Plan{Remove: []string{"l2"}},
		},
		{
			name: "node in an unknown state is kept and counted",
			c: Cluster{Max: 1, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				nodeIn("s1", "starting"),
			}},
			now:  t0,
			want: Plan{Target: 1, Blocked: api.Blocks{atMax(1)}},
		},

		// WakeAt.
		{
			name: "WakeAt is the deadline of the longest idle node above the floor",
			c: Cluster{Min: 1, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				idleNode("a", t0), idleNode("b", t0.Add(2*time.Minute)), idleNode("c", t0.Add(5*time.Minute)),
			}},
			now:  t0.Add(6 * time.Minute),
			want: Plan{Target: 3, WakeAt: t0.Add(10 * time.Minute)},
		},
		{
			name: "WakeAt moves to the next node once the first is removed",
			c: Cluster{Min: 1, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				idleNode("a", t0), idleNode("b", t0.Add(2*time.Minute)), idleNode("c", t0.Add(5*time.Minute)),
			}},
			now:  t0.Add(10 * time.Minute),
			want: Plan{Remove: []string{"a"}, Target: 2, WakeAt: t0.Add(12 * time.Minute)},
		},
		{
			name: "no WakeAt once only min is left",
			c: Cluster{Min: 1, Max: 5, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				idleNode("a", t0), idleNode("b", t0.Add(2*time.Minute)), idleNode("c", t0.Add(5*time.Minute)),
			}},
			now:  t0.Add(12 * time.Minute),
			want: Plan{Remove: []string{"a", "b"}, Target: 1},
		},
		{
			name: "no WakeAt for idle nodes reserved by a waiting gang",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 4, 1)}, Nodes: []Node{
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)),
			}},
			now:  t0.Add(time.Minute),
			want: Plan{Create: 2, Target: 4},
		},
		{
			name: "no WakeAt when only busy nodes",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: -1, Nodes: []Node{
				runningNode("r1", "a", t0),
			}},
			now:  t0,
			want: Plan{Target: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneCluster(tt.c)
			checkPlan(t, Decide(tt.c, tt.now), tt.want)
			if !reflect.DeepEqual(before, tt.c) {
				t.Errorf("Decide modified its input")
			}
		})
	}
}

// TestDecideIdleLifecycle steps one cluster through a day of a job: grow
// from zero, run, go idle, shrink back, as the controller would.
func TestDecideIdleLifecycle(t *testing.T) {
	c := Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a")}

	p := Decide(c, t0)
	checkPlan(t, p, Plan{Create: 1, Target: 1})

	c.Nodes = []Node{preparingNode("n1", t0)}
	checkPlan(t, Decide(c, t0.Add(time.Minute)), Plan{Target: 1})

	c.Nodes = []Node{idleNode("n1", t0.Add(3*time.Minute))}
	c.Nodes[0].Created = t0
	p = Decide(c, t0.Add(3*time.Minute))
	checkPlan(t, p, Plan{Assign: []Assignment{{JobID: "a", NodeIDs: []string{"n1"}}}, Target: 1})

	c.Queued = nil
	c.Nodes[0] = runningNode("n1", "a", t0)
	checkPlan(t, Decide(c, t0.Add(time.Hour)), Plan{Target: 1})

	done := t0.Add(2 * time.Hour)
	c.Nodes[0] = Node{ID: "n1", State: NodeIdle, IdleSince: done, Created: t0}
	p = Decide(c, done)
	checkPlan(t, p, Plan{Target: 1, WakeAt: done.Add(timeout)})
	checkPlan(t, Decide(c, p.WakeAt.Add(-time.Nanosecond)), p)
	checkPlan(t, Decide(c, p.WakeAt), Plan{Remove: []string{"n1"}})
}

func TestApplyAssignments(t *testing.T) {
	c := Cluster{Max: 3, Queued: jobs("a", "b"), Nodes: []Node{idleNode("n1", t0), idleNode("n2", t0)}}
	before := cloneCluster(c)
	got := ApplyAssignments(c, []Assignment{{JobID: "a", NodeIDs: []string{"n2"}}})
	if !reflect.DeepEqual(before, c) {
		t.Fatalf("ApplyAssignments modified its input")
	}
	wantNodes := []Node{idleNode("n1", t0), idleNode("n2", t0)}
	wantNodes[1].State, wantNodes[1].JobID = NodeRunning, "a"
	if !reflect.DeepEqual(got.Nodes, wantNodes) {
		t.Errorf("nodes: got %+v, want %+v", got.Nodes, wantNodes)
	}
	if want := jobs("a", "b")[1:]; !reflect.DeepEqual(got.Queued, want) {
		t.Errorf("queue: got %+v, want %+v", got.Queued, want)
	}
}
