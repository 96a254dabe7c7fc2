package sim

import (
	"math"
	"reflect"
	"testing"
	"time"
)

// script is a Provider with fixed delays and evictions named per node.
type script struct {
	provision, deletion time.Duration
	evict               map[NodeRef]time.Duration // after ready; absent: never
}

var _ Provider = (*script)(nil)

func (p *script) ProvisionDelay(NodeRef) time.Duration { return p.provision }
func (p *script) DeletionDelay(NodeRef) time.Duration  { return p.deletion }
func (p *script) EvictAfter(n NodeRef) time.Duration {
	if d, ok := p.evict[NodeRef{Cluster: n.Cluster, K: n.K}]; ok {
		return d
	}
	return -1
}

const sec = time.Second

// testConfig: 0..10 nodes of Standard_NC6s_v3 (1 GPU, $3.06 an hour,
// $0.612 low priority), 60 s idle, ready in 100 s, gone in 10 s.
func testConfig() Config {
	c := DefaultConfig()
	c.Size, c.Min, c.Max, c.IdleTimeout = "Standard_NC6s_v3", 0, 10, 60*sec
	c.Provider = &script{provision: 100 * sec, deletion: 10 * sec}
	return c
}

// tj is a trace job: submitted at submit seconds, running dur seconds.
func tj(vc string, submit, dur float64, nodes int) Job {
	return Job{Submit: time.Duration(submit * float64(sec)), Duration: time.Duration(dur * float64(sec)), Nodes: nodes, VC: vc}
}

func trace(jobs ...Job) *Trace {
	t := &Trace{Jobs: jobs, HasNodes: true, HasVC: true}
	t.sort()
	return t
}

// want is the part of Metrics the hand computations fix; seconds of node
// time rather than hours, to write them exactly.
type want struct {
	billed, busy, idle, prep, deleting, lost float64 // node-seconds
	delays                                   Delays
	cold, peak, ups, downs, created, removed int
	evictions, completed, failed, rejected   int
	end                                      float64 // seconds
}

func check(t *testing.T, m Metrics, price float64, w want) {
	t.Helper()
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("billed node-seconds", m.BilledNodeHours*3600, w.billed)
	near("busy node-seconds", m.BusyNodeHours*3600, w.busy)
	near("idle node-seconds", m.IdleNodeHours*3600, w.idle)
	near("provisioning node-seconds", m.ProvisioningNodeHours*3600, w.prep)
	near("deleting node-seconds", m.DeletingNodeHours*3600, w.deleting)
	near("lost node-seconds", m.LostNodeHours*3600, w.lost)
	near("cost", m.Cost, w.billed/3600*price)
	near("end", m.Hours*3600, w.end)
	if m.QueueDelay != w.delays {
		t.Errorf("queue delay %+v, want %+v", m.QueueDelay, w.delays)
	}
	got := []int{m.ColdStarts, m.PeakNodes, m.ScaleUps, m.ScaleDowns, m.NodesCreated, m.NodesRemoved, m.Evictions, m.Completed, m.Failed, m.Rejected}
	exp := []int{w.cold, w.peak, w.ups, w.downs, w.created, w.removed, w.evictions, w.completed, w.failed, w.rejected}
	names := []string{"cold starts", "peak nodes", "scale-ups", "scale-downs", "nodes created", "nodes removed", "evictions", "completed", "failed", "rejected"}
	for i := range got {
		if got[i] != exp[i] {
			t.Errorf("%s = %d, want %d", names[i], got[i], exp[i])
		}
	}
}

// delays is a Delays of fewer than 20 jobs, whose nearest-rank p95 is
// their p99.
func delays(mean, p50, p90, p99, max float64) Delays {
	return Delays{Mean: mean, P50: p50, P90: p90, P95: p99, P99: p99, Max: max}
}

// TestHandComputed checks whole runs against timelines worked out by hand
// (in the comments: t in seconds).
func TestHandComputed(t *testing.T) {
	tests := []struct {
		name  string
		trace *Trace
		edit  func(*Config)
		want  want
	}{
		{
			// 0 node requested; 100 ready, job runs to 1100; idle
			// until 1160, removed; gone at 1170.
			name:  "one job",
			trace: trace(tj("a", 0, 1000, 1)),
			want: want{billed: 1170, busy: 1000, idle: 60, prep: 100, deleting: 10,
				delays: delays(100, 100, 100, 100, 100), cold: 1, peak: 1, ups: 1, downs: 1, created: 1, removed: 1, completed: 1, end: 1170},
		},
		{
			// A at 0: n1 (ready 100, A 100-1100, idle to 1160, gone
			// 1170). B at 50: n2 (ready 150, B 150-650, idle to 710,
			// gone 720).
			name:  "two overlapping jobs",
			trace: trace(tj("a", 0, 1000, 1), tj("a", 50, 500, 1)),
			want: want{billed: 1170 + 670, busy: 1500, idle: 120, prep: 200, deleting: 20,
				delays: delays(100, 100, 100, 100, 100), cold: 2, peak: 2, ups: 2, downs: 2, created: 2, removed: 2, completed: 2, end: 1170},
		},
		{
			// A: n1 ready 100, runs to 1100, idle. B at 1130 takes n1
			// at once (warm), runs to 1330; idle to 1390; gone 1400.
			name:  "a job arriving during the idle window",
			trace: trace(tj("a", 0, 1000, 1), tj("a", 1130, 200, 1)),
			want: want{billed: 1400, busy: 1200, idle: 90, prep: 100, deleting: 10,
				delays: delays(50, 0, 100, 100, 100), cold: 1, peak: 1, ups: 1, downs: 1, created: 1, removed: 1, completed: 2, end: 1400},
		},
		{
			// Max 1. A: n1 ready 100, runs to 1100. B at 10 waits for
			// n1: runs 1100-1200 (waited 1090, not cold); idle to 1260;
			// gone 1270.
			name:  "max reached",
			trace: trace(tj("a", 0, 1000, 1), tj("a", 10, 100, 1)),
			edit:  func(c *Config) { c.Max = 1 },
			want: want{billed: 1270, busy: 1100, idle: 60, prep: 100, deleting: 10,
				delays: delays(595, 100, 1090, 1090, 1090), cold: 1, peak: 1, ups: 1, downs: 1, created: 1, removed: 1, completed: 2, end: 1270},
		},
		{
			// Min 1. n1 requested at 0, ready 100. A at 100 takes it
			// (runs to 600); idle 600-1000, kept for the minimum; B at
			// 1000 runs to 1100; the run ends there, n1 still there.
			name:  "min kept",
			trace: trace(tj("a", 100, 500, 1), tj("a", 1000, 100, 1)),
			edit:  func(c *Config) { c.Min, c.Max = 1, 3 },
			want: want{billed: 1100, busy: 600, idle: 400, prep: 100,
				delays: delays(0, 0, 0, 0, 0), peak: 1, ups: 1, created: 1, completed: 2, end: 1100},
		},
		{
			// A job too big for max is refused; nothing runs.
			name:  "job bigger than max",
			trace: trace(tj("a", 0, 100, 11)),
			want:  want{rejected: 1},
		},
		{
			// Low priority; n1 evicted 300 s after ready. A: n1 ready
			// 100, runs 100-400 (300 s lost); n1 preempted at 400 (no
			// longer billed) and removed; A queued again; n2 requested
			// at 400, ready 500, A runs 500-1500; idle to 1560; gone
			// 1570. A waited 100 + 100.
			name:  "eviction requeues the job",
			trace: trace(tj("a", 0, 1000, 1)),
			edit: func(c *Config) {
				c.LowPriority = true
				c.Provider = &script{provision: 100 * sec, deletion: 10 * sec, evict: map[NodeRef]time.Duration{{Cluster: "a", K: 1}: 300 * sec}}
			},
			want: want{billed: 400 + 1170, busy: 1300, idle: 60, prep: 200, deleting: 10, lost: 300,
				delays: delays(200, 200, 200, 200, 200), cold: 1, peak: 1, ups: 2, downs: 1, created: 2, removed: 1, evictions: 1, completed: 1, end: 1570},
		},
		{
			// A gang job of 2 nodes: both requested at 0, ready 100,
			// runs to 600 on both; idle to 660; gone 670.
			name:  "gang job",
			trace: trace(tj("a", 0, 500, 2)),
			want: want{billed: 2 * 670, busy: 1000, idle: 120, prep: 200, deleting: 20,
				delays: delays(100, 100, 100, 100, 100), cold: 1, peak: 2, ups: 1, downs: 1, created: 2, removed: 2, completed: 1, end: 670},
		},
		{
			// Ten preemptions fail a job: every node is evicted 50 s
			// after ready; each attempt waits 100 s for a new node.
			name:  "preempted too often",
			trace: trace(tj("a", 0, 1000, 1)),
			edit: func(c *Config) {
				c.LowPriority, c.MaxPreemptions = true, 2
				c.Provider = &script{provision: 100 * sec, deletion: 10 * sec, evict: map[NodeRef]time.Duration{{Cluster: "a", K: 1}: 50 * sec, {Cluster: "a", K: 2}: 50 * sec}}
			},
			// n1 0-150 (prep 100, busy 50), n2 150-300 (prep 100, busy 50).
			want: want{billed: 300, busy: 100, prep: 200, lost: 100,
				cold: 0, peak: 1, ups: 2, created: 2, evictions: 2, failed: 1, end: 300},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			r, err := Run(tt.trace, cfg)
			if err != nil {
				t.Fatal(err)
			}
			check(t, r.Total, r.Price, tt.want)
			if len(r.Clusters) != 1 || r.Clusters[0].Cluster != "a" {
				t.Errorf("clusters %+v, want one named a", r.Clusters)
			}
		})
	}
}

// TestQuotaShared: two clusters share 6 cores, one Standard_NC6s_v3 node.
// a's job takes the node at 0 (ready 100, runs to 1100, idle to 1160,
// gone 1170); b's job waits for quota until 1170, its node is ready at
// 1270, runs to 1370, idle to 1430, gone 1440.
func TestQuotaShared(t *testing.T) {
	cfg := testConfig()
	cfg.QuotaCores = 6
	r, err := Run(trace(tj("a", 0, 1000, 1), tj("b", 0, 100, 1)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	check(t, r.Clusters[0], r.Price, want{billed: 1170, busy: 1000, idle: 60, prep: 100, deleting: 10,
		delays: delays(100, 100, 100, 100, 100), cold: 1, peak: 1, ups: 1, downs: 1, created: 1, removed: 1, completed: 1, end: 1440})
	check(t, r.Clusters[1], r.Price, want{billed: 270, busy: 100, idle: 60, prep: 100, deleting: 10,
		delays: delays(1270, 1270, 1270, 1270, 1270), cold: 1, peak: 1, ups: 1, downs: 1, created: 1, removed: 1, completed: 1, end: 1440})
	if r.Total.PeakNodes != 1 {
		t.Errorf("peak nodes %d over both clusters, want 1: the quota holds one", r.Total.PeakNodes)
	}
}

// TestOneCluster puts the jobs of two vcs in one cluster: the second job
// finds the first one's node idle.
func TestOneCluster(t *testing.T) {
	cfg := testConfig()
	cfg.OneCluster = true
	r, err := Run(trace(tj("a", 0, 1000, 1), tj("b", 1130, 200, 1)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Clusters) != 1 || r.Clusters[0].Cluster != "all" || r.Total.NodesCreated != 1 || r.Total.QueueDelay.Mean != 50 {
		t.Errorf("got %+v, want one cluster, one node, mean delay 50 s", r.Total)
	}
}

// TestAdaptiveFallsBack: with too little history the adaptive policy is the
// fixed timeout, so short runs match exactly.
func TestAdaptiveFallsBack(t *testing.T) {
	tr := trace(tj("a", 0, 1000, 1), tj("a", 1130, 200, 1))
	fixed, err := Run(tr, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Policy = PolicyAdaptive
	adaptive, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fixed.Total, adaptive.Total) {
		t.Errorf("adaptive %+v\nfixed    %+v", adaptive.Total, fixed.Total)
	}
}

// TestDeterministic: the same seed gives the same run, random delays and
// evictions included; another seed does not.
func TestDeterministic(t *testing.T) {
	tr, err := Synthetic(Bursty, 2000, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Size, cfg.Policy, cfg.LowPriority, cfg.EvictionRate = "Standard_NC6s_v3", PolicyAdaptive, true, 0.05
	cfg.Timeline = true
	a, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with one seed differ")
	}
	if a.Total.Evictions == 0 || a.Total.Completed+a.Total.Failed+a.Total.Rejected != a.Total.Jobs {
		t.Errorf("evictions %d, completed %d + failed %d + rejected %d of %d jobs", a.Total.Evictions, a.Total.Completed, a.Total.Failed, a.Total.Rejected, a.Total.Jobs)
	}
	cfg.Seed++
	c, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Total, c.Total) {
		t.Error("another seed gave the same run")
	}
}

// TestInvariants runs synthetic traces under several settings and checks
// what must hold whatever happens.
func TestInvariants(t *testing.T) {
	tr, err := Synthetic(Bursty, 3000, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(*Config){
		func(c *Config) {},
		func(c *Config) { c.Policy = PolicyAdaptive },
		func(c *Config) { c.Min, c.Max = 3, 20 },
		func(c *Config) { c.QuotaCores = 60; c.Policy = PolicyAdaptive },
		func(c *Config) { c.LowPriority, c.EvictionRate = true, 0.2 },
		func(c *Config) { c.IdleTimeout = 0; c.OneCluster = true },
	} {
		cfg := DefaultConfig()
		cfg.Size = "Standard_NC6s_v3"
		edit(&cfg)
		r, err := Run(tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Total
		sum := m.BusyNodeHours + m.IdleNodeHours + m.ProvisioningNodeHours + m.DeletingNodeHours
		switch {
		case m.Completed+m.Failed+m.Rejected != m.Jobs:
			t.Errorf("%+v: %d completed + %d failed + %d rejected != %d jobs", cfg.Settings(), m.Completed, m.Failed, m.Rejected, m.Jobs)
		case math.Abs(sum-m.BilledNodeHours) > 1e-6*m.BilledNodeHours:
			t.Errorf("%+v: billed %v != busy+idle+provisioning+deleting %v", cfg.Settings(), m.BilledNodeHours, sum)
		case cfg.QuotaCores > 0 && m.PeakNodes*6 > cfg.QuotaCores:
			t.Errorf("%+v: peak %d nodes over a quota of %d cores", cfg.Settings(), m.PeakNodes, cfg.QuotaCores)
		case m.PeakNodes > cfg.Max*len(r.Clusters):
			t.Errorf("%+v: peak %d nodes, max %d per cluster", cfg.Settings(), m.PeakNodes, cfg.Max)
		case m.QueueDelay.Mean < 0 || m.QueueDelay.P50 > m.QueueDelay.P90 || m.QueueDelay.P90 > m.QueueDelay.P99 || m.QueueDelay.P99 > m.QueueDelay.Max:
			t.Errorf("%+v: delays %+v out of order", cfg.Settings(), m.QueueDelay)
		}
		for _, c := range r.Clusters {
			if c.PeakNodes > cfg.Max {
				t.Errorf("%+v: cluster %s peaked at %d nodes, max %d", cfg.Settings(), c.Cluster, c.PeakNodes, cfg.Max)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, edit := range []func(*Config){
		func(c *Config) { c.Size = "Standard_Nope" },
		func(c *Config) { c.Min, c.Max = 3, 2 },
		func(c *Config) { c.Max = 0 },
		func(c *Config) { c.IdleTimeout = -sec },
		func(c *Config) { c.Policy = "sometimes" },
		func(c *Config) { c.EvictionRate = 1 }, // dedicated
		func(c *Config) { c.Size, c.LowPriority = "Standard_ND96isr_H100_v5", true },
		func(c *Config) { c.QuotaCores = -1 },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c.Settings())
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	// A trace that counts GPUs needs a size that has some.
	tr := &Trace{Jobs: []Job{{Duration: sec, GPUs: 4}}, HasGPUs: true}
	if _, err := Run(tr, DefaultConfig()); err == nil {
		t.Error("gpus on a CPU size: no error")
	}
}
