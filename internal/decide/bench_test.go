package decide

import (
	"fmt"
	"testing"
	"time"
)

// benchCluster has n queued one-node jobs and n nodes, half of them idle.
func benchCluster(n int) Cluster {
	c := Cluster{ID: "bench", Max: 4 * n, IdleTimeout: timeout, Headroom: -1}
	for i := range n {
		id := fmt.Sprintf("node-%06d", i)
		if i%2 == 0 {
			c.Nodes = append(c.Nodes, idleNode(id, t0.Add(time.Duration(i)*time.Second)))
		} else {
			c.Nodes = append(c.Nodes, runningNode(id, fmt.Sprintf("run-%06d", i), t0))
		}
		c.Queued = append(c.Queued, Job{ID: fmt.Sprintf("job-%06d", i), InstanceCount: 1, Priority: i % 3, Seq: int64(n - i)})
	}
	return c
}

func benchmarkDecide(b *testing.B, n int) {
	c := benchCluster(n)
	now := t0.Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		p := Decide(c, now)
		if len(p.Assign) != n/2 {
			b.Fatalf("assigned %d jobs, want %d", len(p.Assign), n/2)
		}
	}
}

func BenchmarkDecide1000x1000(b *testing.B) { benchmarkDecide(b, 1000) }

// BenchmarkDecide10000x10000 shows the growth: about ten times the 1000
// case (n log n), not a hundred.
func BenchmarkDecide10000x10000(b *testing.B) { benchmarkDecide(b, 10000) }
