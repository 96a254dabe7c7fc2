package decide

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// TestQuotaWait covers which queued jobs a plan says wait for quota, and
// for how many nodes, when Headroom cuts Create.
func TestQuotaWait(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
		want Plan
	}{
		{
			name: "started jobs do not wait; preparing and new nodes serve the next ones in order",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: 1, Queued: jobs("a", "b", "c", "d"), Nodes: []Node{
				idleNode("i1", t0), preparingNode("p1", t0),
			}},
			want: Plan{
				Assign: []Assignment{{JobID: "a", NodeIDs: []string{"i1"}}},
				Create: 1, Target: 3, Blocked: api.Blocks{quotaAllows(1)},
				QuotaShort: 1, QuotaWait: []Wait{{"d", 1}},
			},
		},
		{
			name: "a gang job partly covered by a preparing node is short of the rest",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: 1, Queued: []Job{gang("g", 4, 1), gang("h", 2, 2)}, Nodes: []Node{
				preparingNode("p1", t0),
			}},
			want: Plan{Create: 1, Target: 2, Blocked: api.Blocks{quotaAllows(1)},
				QuotaShort: 4, QuotaWait: []Wait{{"g", 2}, {"h", 2}}},
		},
		{
			name: "a job past maxNodeCount beside the busy nodes waits for max, not quota",
			c: Cluster{Max: 3, IdleTimeout: timeout, Headroom: 0, Queued: []Job{gang("g", 3, 1), gang("s", 1, 2)}, Nodes: []Node{
				runningNode("r1", "x", t0),
			}},
			want: Plan{Target: 1, Blocked: api.Blocks{atMax(3), quotaAllows(0)}, QuotaShort: 2},
		},
		{
			name: "queue order is priority first: the high-priority job gets the ready node",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: 0, Queued: []Job{
				{ID: "low", InstanceCount: 1, Seq: 1}, {ID: "high", InstanceCount: 1, Priority: 5, Seq: 2},
			}, Nodes: []Node{preparingNode("p1", t0)}},
			want: Plan{Target: 1, Blocked: api.Blocks{quotaAllows(0)}, QuotaShort: 1, QuotaWait: []Wait{{"low", 1}}},
		},
		{
			name: "jobs that can never run are neither demand nor waiting",
			c:    Cluster{Max: 2, IdleTimeout: timeout, Headroom: 0, Queued: []Job{gang("big", 5, 1), gang("s", 1, 2)}},
			want: Plan{Blocked: api.Blocks{tooBig("big", 5, 2), quotaAllows(0)},
				QuotaShort: 1, QuotaWait: []Wait{{"s", 1}}},
		},
		{
			name: "quota that does not bind leaves the fields empty",
			c:    Cluster{Max: 2, IdleTimeout: timeout, Headroom: 5, Queued: jobs("a", "b", "c")},
			want: Plan{Create: 2, Target: 2, Blocked: api.Blocks{atMax(2)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPlan(t, Decide(tt.c, t0), tt.want)
			// Autoscale on the snapshot with the assignments applied
			// agrees on who waits.
			p := Autoscale(ApplyAssignments(tt.c, tt.want.Assign), t0)
			p.Assign = tt.want.Assign
			checkPlan(t, p, tt.want)
		})
	}
}
