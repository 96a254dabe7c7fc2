package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
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

// benchmarkDecideFair is benchmarkDecide on a fair-share cluster with
// preemption: the n jobs belong to 16 groups with recent usage, the
// running ones too, and n more jobs wait at maxNodeCount.
func benchmarkDecideFair(b *testing.B, n int) {
	c := benchCluster(n)
	c.Queue = api.Queue{FairShare: true, By: api.FairShareByPrincipal, HalfLife: 24 * time.Hour,
		Preemption: api.PreemptOverShare, MinRuntime: 10 * time.Minute}
	c.Usage = map[string]Usage{}
	for g := range 16 {
		c.Usage[fmt.Sprintf("group-%02d", g)] = Usage{Value: float64(g) * 3600, At: t0, Held: g}
	}
	for i := range c.Queued {
		c.Queued[i].Group = fmt.Sprintf("group-%02d", i%16)
	}
	for i := range c.Nodes {
		if id := c.Nodes[i].JobID; id != "" {
			c.Running = append(c.Running, Running{ID: id, Group: fmt.Sprintf("group-%02d", i%16), Started: t0})
		}
	}
	now := t0.Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		p := Decide(c, now)
		if len(p.Assign) != n/2 {
			b.Fatalf("assigned %d jobs, want %d", len(p.Assign), n/2)
		}
	}
}

func BenchmarkDecideFair1000x1000(b *testing.B)   { benchmarkDecideFair(b, 1000) }
func BenchmarkDecideFair10000x10000(b *testing.B) { benchmarkDecideFair(b, 10000) }
