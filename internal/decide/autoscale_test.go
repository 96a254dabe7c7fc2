package decide

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// TestAutoscale covers Autoscale on snapshots that Schedule has not seen.
func TestAutoscale(t *testing.T) {
	tests := []struct {
		name string
		c    Cluster
		now  time.Time
		want Plan
	}{
		{
			name: "idle nodes the queue would use are kept; the rest go, longest idle first",
			c: Cluster{Max: 5, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{
				idleNode("i1", t0), idleNode("i2", t0.Add(time.Minute)), idleNode("i3", t0.Add(2*time.Minute)),
			}},
			now:  t0.Add(time.Hour),
			want: Plan{Remove: []string{"i1", "i2"}, Target: 1},
		},
		{
			name: "assignments are not made",
			c:    Cluster{Max: 5, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{idleNode("i1", t0)}},
			now:  t0,
			want: Plan{Target: 1},
		},
		{
			name: "negative idle timeout counts as zero",
			c:    Cluster{Max: 5, IdleTimeout: -timeout, Headroom: -1, Nodes: []Node{idleNode("i1", t0)}},
			now:  t0,
			want: Plan{Remove: []string{"i1"}},
		},
		{
			name: "negative max counts as zero",
			c:    Cluster{Min: 1, Max: -1, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), Nodes: []Node{idleNode("i1", t0)}},
			now:  t0,
			want: Plan{Remove: []string{"i1"}, Blocked: api.Blocks{tooBig("a", 1, 0)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPlan(t, Autoscale(tt.c, tt.now), tt.want)
		})
	}
}
