package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
)

// groupOf finds a team's figures.
func groupOf(t *testing.T, r *Result, name string) GroupMetrics {
	t.Helper()
	for _, g := range r.Groups {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %s in %+v", name, r.Groups)
	return GroupMetrics{}
}

// Team a queues three 100 s jobs on a cluster of one node, team b one
// job a second later. FIFO runs b's last; fair share runs it second. Both
// report each team's delays, node time received and entitled, and
// fairness. Worked out by hand (t in seconds; the node is ready at 100):
// a team is entitled to the whole node while it alone wants it, and half
// of it while both do.
func TestFairShareTeams(t *testing.T) {
	tr := trace(tj("a", 0, 100, 1), tj("a", 0, 100, 1), tj("a", 0, 100, 1), tj("b", 1, 100, 1))
	for _, tc := range []struct {
		queue      string
		delays     map[string]float64 // mean queue delay
		entA, entB float64            // node-seconds entitled
	}{
		// FIFO: a runs 100–400, b 400–500 (waited 399). Both want the
		// node from 1 to 400.
		{QueueFifo, map[string]float64{"a": 200, "b": 399}, 1 + 399.0/2, 399.0/2 + 100},
		// Fair share: a 100–200, b 200–300 (waited 199), a 300–500
		// (waited 300 and 400). Both want it from 1 to 300.
		{QueueFair, map[string]float64{"a": (100 + 300 + 400) / 3.0, "b": 199}, 1 + 299.0/2 + 200, 299.0 / 2},
	} {
		t.Run(tc.queue, func(t *testing.T) {
			cfg := testConfig()
			cfg.Max, cfg.Queue, cfg.OneCluster = 1, tc.queue, true
			r, err := Run(tr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Unit != "GPU" || len(r.Groups) != 2 || r.Fairness == nil {
				t.Fatalf("groups %+v unit %q fairness %v", r.Groups, r.Unit, r.Fairness)
			}
			for name, mean := range tc.delays {
				if g := groupOf(t, r, name); math.Abs(g.QueueDelay.Mean-mean) > 1e-9 {
					t.Errorf("team %s waited %v on average, want %v", name, g.QueueDelay.Mean, mean)
				}
			}
			a, b := groupOf(t, r, "a"), groupOf(t, r, "b")
			if math.Abs(a.ReceivedHours*3600-300) > 1e-6 || math.Abs(b.ReceivedHours*3600-100) > 1e-6 {
				t.Errorf("received a %v b %v node-seconds, want 300 and 100", a.ReceivedHours*3600, b.ReceivedHours*3600)
			}
			if math.Abs(a.EntitledHours*3600-tc.entA) > 1e-6 || math.Abs(b.EntitledHours*3600-tc.entB) > 1e-6 {
				t.Errorf("entitled a %v b %v node-seconds, want %v and %v", a.EntitledHours*3600, b.EntitledHours*3600, tc.entA, tc.entB)
			}
			x, y := 300/tc.entA, 100/tc.entB
			if want := (x + y) * (x + y) / (2 * (x*x + y*y)); math.Abs(r.Fairness.Jain-want) > 1e-9 || math.Abs(a.Ratio-x) > 1e-9 {
				t.Errorf("Jain's index %v, ratio of a %v; want %v, %v", r.Fairness.Jain, a.Ratio, want, x)
			}
		})
	}
}

// With preemption over_share a team that holds the whole cluster with
// long jobs gives a node to a team that arrives, once its newest job has
// run its minimum runtime; the stopped job runs again from the start
// (checkpoints are not modelled) and its lost work is counted.
func TestFairSharePreemptsInTheSimulator(t *testing.T) {
	tr := trace(tj("a", 0, 10000, 1), tj("a", 0, 10000, 1), tj("b", 200, 100, 1))
	cfg := testConfig()
	cfg.Max, cfg.Queue, cfg.Preemption, cfg.MinRuntime = 2, QueueFair, PreemptOverShare, 10*time.Minute
	r, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := groupOf(t, r, "b")
	// a's jobs start at 100 (nodes ready); b's at 100+600 = 700 when a's
	// newest reaches its minimum runtime.
	if b.QueueDelay.Mean != 500 || r.Total.Preemptions != 1 || r.Total.Completed != 3 {
		t.Errorf("b waited %v, %d preemptions, %d completed; want 500 s, 1, 3", b.QueueDelay.Mean, r.Total.Preemptions, r.Total.Completed)
	}
	a := groupOf(t, r, "a")
	if a.Preempted != 1 || math.Abs(a.LostHours*3600-600) > 1e-6 || math.Abs(r.Total.LostNodeHours*3600-600) > 1e-6 {
		t.Errorf("a: %d preempted, lost %v node-seconds (total %v), want 1 and 600", a.Preempted, a.LostHours*3600, r.Total.LostNodeHours*3600)
	}
	if r.Total.UsefulUtilization >= r.Total.Utilization {
		t.Errorf("useful utilization %v not below utilization %v", r.Total.UsefulUtilization, r.Total.Utilization)
	}
}

// TestFairQueuePrefix backs the simulator's shortcut under fair share and
// preemption: each group's shortest prefix needing more than maxNodeCount
// nodes gives the same Plan as the whole queue.
func TestFairQueuePrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	t0 := Epoch
	groups := []string{"a", "b", "c"}
	for range 5000 {
		c := decide.Cluster{ID: "c", Max: 1 + r.IntN(8), IdleTimeout: time.Minute, Headroom: r.IntN(6) - 1,
			Queue: api.Queue{FairShare: true, By: "tag:vc", HalfLife: time.Hour, Weights: map[string]float64{"a": 2},
				Preemption: []string{api.PreemptNone, api.PreemptOverShare}[r.IntN(2)], MinRuntime: time.Minute},
			Usage: map[string]decide.Usage{"b": {Value: float64(r.IntN(7200)), At: t0}}}
		for i := range r.IntN(10) {
			n := decide.Node{ID: fmt.Sprintf("n%d", i), State: decide.NodeIdle, Created: t0, IdleSince: t0.Add(time.Duration(r.IntN(120)) * time.Second)}
			if r.IntN(2) == 0 {
				n.State, n.JobID = decide.NodeRunning, fmt.Sprintf("r%d", i)
				c.Running = append(c.Running, decide.Running{ID: n.JobID, Group: groups[r.IntN(3)], Seq: int64(100 + i), Started: t0})
			}
			c.Nodes = append(c.Nodes, n)
		}
		seq := int64(0)
		for _, g := range groups {
			for range r.IntN(12) {
				seq++
				c.Queued = append(c.Queued, decide.Job{ID: fmt.Sprintf("j%02d", seq), InstanceCount: 1 + r.IntN(c.Max), Seq: seq, Group: g})
			}
		}
		cut := c
		cut.Queued = nil
		need := map[string]int{}
		for _, j := range c.Queued {
			if need[j.Group] > c.Max {
				continue
			}
			cut.Queued = append(cut.Queued, j)
			need[j.Group] += j.InstanceCount
		}
		now := t0.Add(time.Duration(r.IntN(300)) * time.Second)
		full, short := decide.Decide(c, now), decide.Decide(cut, now)
		if !reflect.DeepEqual(full, short) {
			t.Fatalf("cluster %+v\nfull queue %+v\nprefix     %+v", c, full, short)
		}
	}
}

func TestQueueConfigValidate(t *testing.T) {
	for _, edit := range []func(*Config){
		func(c *Config) { c.Queue = "lottery" },
		func(c *Config) { c.Preemption = "always" },
		func(c *Config) { c.Preemption = PreemptOverShare }, // FIFO
		func(c *Config) { c.Queue, c.HalfLife = QueueFair, time.Second },
		func(c *Config) { c.Queue, c.Weights = QueueFair, map[string]float64{"a": 0} },
		func(c *Config) { c.Weights = map[string]float64{"a": 2} }, // FIFO
		func(c *Config) { c.Preemption, c.MinRuntime = PreemptLowerPriority, -time.Second },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c.Settings())
		}
	}
	// The compute a fair-share setting describes decides under fair share
	// by vc, with the setting's preemption.
	c := DefaultConfig()
	c.Queue, c.Preemption, c.Weights = QueueFair, PreemptOverShare, map[string]float64{"a": 3}
	comp := c.Compute()
	q := comp.Queue()
	if !q.FairShare || q.Tag() != "vc" || q.Weight("a") != 3 || q.Preemption != api.PreemptOverShare || q.MinRuntime != 10*time.Minute || q.HalfLife != 24*time.Hour {
		t.Errorf("queue %+v", q)
	}
}
