package decide

import (
	"reflect"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	threeIdle := []Node{
		idleNode("n1", t0),
		idleNode("n2", t0.Add(time.Minute)),
		idleNode("n3", t0.Add(2*time.Minute)),
	}
	tests := []struct {
		name string
		c    Cluster
		want []Assignment
	}{
		{
			name: "empty queue",
			c:    Cluster{Max: 3, Nodes: threeIdle},
		},
		{
			name: "no idle nodes",
			c: Cluster{Max: 3, Queued: jobs("a"), Nodes: []Node{
				runningNode("r1", "x", t0), preparingNode("p1", t0),
			}},
		},
		{
			name: "higher priority first",
			c: Cluster{Max: 3, Nodes: threeIdle[:1], Queued: []Job{
				{ID: "low", InstanceCount: 1, Priority: 0, Seq: 1},
				{ID: "high", InstanceCount: 1, Priority: 5, Seq: 2},
			}},
			want: []Assignment{{JobID: "high", NodeIDs: []string{"n1"}}},
		},
		{
			name: "equal priority is FIFO by Seq, whatever the input order",
			c: Cluster{Max: 3, Nodes: threeIdle[:1], Queued: []Job{
				{ID: "second", InstanceCount: 1, Seq: 2},
				{ID: "first", InstanceCount: 1, Seq: 1},
			}},
			want: []Assignment{{JobID: "first", NodeIDs: []string{"n1"}}},
		},
		{
			name: "equal priority and Seq falls back to job ID",
			c: Cluster{Max: 3, Nodes: threeIdle[:1], Queued: []Job{
				{ID: "b", InstanceCount: 1, Seq: 1},
				{ID: "a", InstanceCount: 1, Seq: 1},
			}},
			want: []Assignment{{JobID: "a", NodeIDs: []string{"n1"}}},
		},
		{
			name: "gang job gets all its nodes, most recently idle first",
			c:    Cluster{Max: 3, Nodes: threeIdle, Queued: []Job{gang("g", 3, 1)}},
			want: []Assignment{{JobID: "g", NodeIDs: []string{"n3", "n2", "n1"}}},
		},
		{
			name: "head job that does not fit reserves the idle nodes: nothing behind it starts",
			c:    Cluster{Max: 10, Nodes: threeIdle, Queued: []Job{gang("a", 4, 1), gang("b", 1, 2)}},
		},
		{
			name: "head job that fits, then a smaller one",
			c:    Cluster{Max: 10, Nodes: threeIdle, Queued: []Job{gang("a", 2, 1), gang("b", 1, 2)}},
			want: []Assignment{
				{JobID: "a", NodeIDs: []string{"n3", "n2"}},
				{JobID: "b", NodeIDs: []string{"n1"}},
			},
		},
		{
			name: "second gang does not fit and blocks the third",
			c: Cluster{Max: 10, Nodes: threeIdle, Queued: []Job{
				gang("a", 2, 1), gang("b", 2, 2), gang("c", 1, 3),
			}},
			want: []Assignment{{JobID: "a", NodeIDs: []string{"n3", "n2"}}},
		},
		{
			name: "job bigger than max never runs and reserves nothing",
			c:    Cluster{Max: 2, Nodes: threeIdle[:1], Queued: []Job{gang("big", 3, 1), gang("small", 1, 2)}},
			want: []Assignment{{JobID: "small", NodeIDs: []string{"n1"}}},
		},
		{
			name: "only idle nodes without a job are usable",
			c: Cluster{Max: 10, Queued: jobs("a", "b", "c"), Nodes: []Node{
				preparingNode("p", t0),
				runningNode("r", "x", t0),
				nodeIn("l", NodeLeaving),
				nodeIn("pe", NodePreempted),
				nodeIn("u", NodeUnusable),
				{ID: "claimed", State: NodeIdle, JobID: "y", IdleSince: t0},
				idleNode("free", t0),
			}},
			want: []Assignment{{JobID: "a", NodeIDs: []string{"free"}}},
		},
		{
			name: "equal IdleSince falls back to node ID",
			c: Cluster{Max: 3, Queued: jobs("a", "b"), Nodes: []Node{
				idleNode("z", t0), idleNode("m", t0),
			}},
			want: []Assignment{
				{JobID: "a", NodeIDs: []string{"m"}},
				{JobID: "b", NodeIDs: []string{"z"}},
			},
		},
		{
			name: "instance count below 1 counts as 1",
			c:    Cluster{Max: 3, Nodes: threeIdle[:1], Queued: []Job{gang("zero", 0, 1)}},
			want: []Assignment{{JobID: "zero", NodeIDs: []string{"n1"}}},
		},
		{
			name: "max lowered to the busy count: nothing starts",
			c: Cluster{Max: 2, Queued: jobs("a"), Nodes: []Node{
				runningNode("r1", "x", t0), runningNode("r2", "y", t0), threeIdle[0],
			}},
		},
		{
			name: "max lowered: only the room left under max is used",
			c: Cluster{Max: 2, Queued: jobs("a", "b"), Nodes: append([]Node{
				runningNode("r1", "x", t0)}, threeIdle...)},
			want: []Assignment{{JobID: "a", NodeIDs: []string{"n3"}}},
		},
		{
			name: "max lowered: a gang bigger than the room waits",
			c: Cluster{Max: 2, Queued: []Job{gang("g", 2, 1)}, Nodes: append([]Node{
				runningNode("r1", "x", t0)}, threeIdle...)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneCluster(tt.c)
			got := Schedule(tt.c)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Schedule:\n got %v\nwant %v", got, tt.want)
			}
			if !reflect.DeepEqual(before, tt.c) {
				t.Errorf("Schedule modified its input")
			}
		})
	}
}
