package decide

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The rules that read more than nodes and jobs, applied by Decide so that
// the server and the simulator apply them alike.
func TestDecideRulesBeyondNodesAndJobs(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
		want Plan
	}{
		{
			name: "an idle node with an SSH session is busy: no job on it, not scaled down, another is created",
			c: Cluster{Max: 3, IdleTimeout: time.Minute, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				{ID: "ssh", State: NodeIdle, IdleSince: t0.Add(-time.Hour), Created: t0.Add(-2 * time.Hour), SSHOpen: true},
			}},
			want: Plan{Create: 1, Target: 2},
		},
		{
			name: "a running node whose job went back to the queue is capacity on its way: nothing created for it",
			c: Cluster{Max: 3, IdleTimeout: time.Minute, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				runningNode("r", "a", t0.Add(-time.Hour)),
			}},
			want: Plan{Target: 1},
		},
		{
			name: "the provider backs off: no node is created, the plan says so and wakes when it ends",
			c: Cluster{Max: 3, IdleTimeout: time.Minute, Headroom: -1, Queued: jobs("a", "b"),
				Backoff: Backoff{Until: t0.Add(30 * time.Second), Message: "no capacity"}},
			want: Plan{Target: 0, WakeAt: t0.Add(30 * time.Second), Blocked: api.Blocks{{Kind: api.BlockBackoff, Message: "no capacity"}}},
		},
		{
			name: "a backoff that has ended holds nothing",
			c: Cluster{Max: 3, IdleTimeout: time.Minute, Headroom: -1, Queued: jobs("a"),
				Backoff: Backoff{Until: t0, Message: "no capacity"}},
			want: Plan{Create: 1, Target: 1},
		},
		{
			name: "a schedule's maximum is named in the reason and its next change wakes the plan",
			c:    Cluster{Max: 1, IdleTimeout: time.Minute, Headroom: -1, Queued: jobs("a", "b"), MaxSetBy: "nights", BoundsChange: t0.Add(time.Hour)},
			want: Plan{Create: 1, Target: 1, WakeAt: t0.Add(time.Hour), Blocked: api.Blocks{{Kind: api.BlockAtMax, Max: 1, Schedule: "nights"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPlan(t, Decide(tt.c, t0), tt.want)
		})
	}
}

// A reason about one job names it by its name, not its id.
func TestTooBigNamesTheJob(t *testing.T) {
	c := Cluster{Max: 2, Headroom: -1, Queued: []Job{{ID: "uid-1", Name: "big", InstanceCount: 3, Seq: 1}}}
	p := Decide(c, t0)
	want := api.Blocks{{Kind: api.BlockTooBig, Job: "uid-1", JobName: "big", Need: 3, Max: 2}}
	checkPlan(t, p, Plan{Blocked: want})
	if got := p.Blocked.ForCompute(nil); got != "job big needs 3 nodes, more than maxNodeCount 2" {
		t.Errorf("worded %q", got)
	}
}
