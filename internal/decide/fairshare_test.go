package decide

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

// fair is the fair-share policy of the tests: groups by principal, the
// default half-life, the weights given (group=weight).
func fair(weights ...string) api.Queue {
	q := api.Queue{FairShare: true, By: api.FairShareByPrincipal, HalfLife: 24 * time.Hour, Preemption: api.PreemptNone}
	for _, w := range weights {
		g, v, _ := strings.Cut(w, "=")
		var x float64
		fmt.Sscan(v, &x)
		if q.Weights == nil {
			q.Weights = map[string]float64{}
		}
		q.Weights[g] = x
	}
	return q
}

// owned returns one-node jobs of group g named g1, g2, …, submitted from
// seq on.
func owned(g string, n int, seq int64) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = Job{ID: fmt.Sprintf("%s%d", g, i+1), InstanceCount: 1, Seq: seq + int64(i), Group: g}
	}
	return out
}

// ids names the jobs of the order.
func ids(c Cluster, order []int) []string {
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = c.Queued[k].ID
	}
	return out
}

// idleNodes returns n idle nodes.
func idleNodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = idleNode(fmt.Sprintf("n%02d", i), t0.Add(-time.Minute))
	}
	return out
}

// assigned names the jobs a plan starts, in order.
func assigned(p Plan) []string {
	var out []string
	for _, a := range p.Assign {
		out = append(out, a.JobID)
	}
	return out
}

func TestUsageHalvesEveryHalfLife(t *testing.T) {
	clk := clock.NewFake(t0)
	const half = 24 * time.Hour
	// A group held 4 nodes for an hour, then none.
	u := Usage{}.Advance(clk.Now(), half, 4)
	clk.Step(time.Hour)
	u = u.Advance(clk.Now(), half, 0)
	at := u.Now(clk.Now(), half)
	if want := 4 * 3600 * math.Pow(2, -0.5/24); math.Abs(at-want) > 1 {
		// An hour of 4 nodes, each second decayed by its age: within
		// half an hour's decay of 4 node-hours.
		t.Errorf("after an hour of 4 nodes: %.0f node-seconds, want about %.0f", at, want)
	}
	for i := 1; i <= 3; i++ {
		clk.Step(half)
		got := u.Now(clk.Now(), half)
		if want := at / math.Pow(2, float64(i)); math.Abs(got-want) > 1e-6*at {
			t.Errorf("%d half-lives later: %.3f node-seconds, want %.3f (halved %d times)", i, got, want, i)
		}
	}
	// Reading it does not change it; Advance keeps the same value.
	if again := u.Advance(clk.Now(), half, 0).Now(clk.Now(), half); math.Abs(again-u.Now(clk.Now(), half)) > 1e-9 {
		t.Errorf("Advance changed the usage: %v", again)
	}
	// Holding h nodes for ever tends to h nodes on average.
	v := Usage{}.Advance(t0, half, 6)
	if r := v.Recent(t0.Add(100*half), half); math.Abs(r-6) > 1e-6 {
		t.Errorf("6 nodes for a long time read as %.4f nodes on average, want 6", r)
	}
	// A time before the record reads the record.
	if got := v.Now(t0.Add(-time.Hour), half); got != 0 {
		t.Errorf("before its record: %v", got)
	}
}

func TestFairOrderInterleavesGroups(t *testing.T) {
	// alice queued 12 jobs, then bob 3: FIFO runs alice's first, fair
	// share gives bob the second place and every other one after.
	q := append(owned("alice", 12, 1), owned("bob", 3, 13)...)
	c := Cluster{Max: 2, Queued: q}
	fifo := ids(c, Order(c, t0))
	if fifo[12] != "bob1" {
		t.Fatalf("FIFO order %v: bob's first job should be 13th", fifo)
	}
	c.Queue = fair()
	got := ids(c, Order(c, t0))
	want := []string{"alice1", "bob1", "alice2", "bob2", "alice3", "bob3", "alice4"}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("fair-share order %v, want it to start %v", got, want)
	}
	// Running jobs count: alice holds both nodes, so bob's go first.
	c.Nodes = []Node{runningNode("n1", "a0", t0), runningNode("n2", "a00", t0)}
	c.Running = []Running{{ID: "a0", Group: "alice"}, {ID: "a00", Group: "alice"}}
	got = ids(c, Order(c, t0))
	if want := []string{"bob1", "bob2", "alice1", "bob3", "alice2"}; !slices.Equal(got[:len(want)], want) {
		t.Errorf("with alice holding 2 nodes: order %v, want it to start %v", got, want)
	}
}

func TestFairOrderTable(t *testing.T) {
	hour := time.Hour
	cases := []struct {
		name  string
		queue api.Queue
		usage map[string]Usage
		jobs  []Job
		want  []string
	}{
		{"weights: a group of weight 2 starts twice as many", fair("a=2"),
			nil, append(owned("a", 6, 1), owned("b", 6, 10)...),
			[]string{"a1", "b1", "a2", "a3", "b2", "a4", "a5", "b3", "a6", "b4"}},
		{"recent usage: the group that used nodes lately waits", fair(),
			map[string]Usage{"a": {Value: 3 * 3600 * 34.6, At: t0}}, append(owned("a", 4, 1), owned("b", 4, 10)...),
			[]string{"b1", "b2", "b3", "a1", "b4", "a2", "a3", "a4"}},
		{"usage decays: a day later it weighs half", fair(),
			map[string]Usage{"a": {Value: 6 * 3600 * 34.6, At: t0.Add(-24 * hour)}}, append(owned("a", 4, 1), owned("b", 4, 10)...),
			[]string{"b1", "b2", "b3", "a1", "b4", "a2", "a3", "a4"}},
		{"priority orders within a group and breaks ties between them", fair(),
			nil, []Job{{ID: "a1", Group: "a", Seq: 1}, {ID: "a2", Group: "a", Seq: 2, Priority: 5}, {ID: "b1", Group: "b", Seq: 3, Priority: 1}},
			[]string{"a2", "b1", "a1"}},
		{"a gang counts all its nodes", fair(),
			nil, []Job{gangOf("a1", "a", 3, 1), {ID: "a2", Group: "a", Seq: 2}, {ID: "b1", Group: "b", Seq: 3}, {ID: "b2", Group: "b", Seq: 4}, {ID: "b3", Group: "b", Seq: 5}},
			[]string{"a1", "b1", "b2", "b3", "a2"}},
		{"a job too big for the cluster holds nothing", fair(),
			nil, []Job{gangOf("a1", "a", 99, 1), {ID: "a2", Group: "a", Seq: 2}, {ID: "b1", Group: "b", Seq: 3}},
			[]string{"a1", "a2", "b1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Cluster{Max: 8, Queued: tc.jobs, Queue: tc.queue, Usage: tc.usage}
			if got := ids(c, Order(c, t0)); !slices.Equal(got[:len(tc.want)], tc.want) {
				t.Errorf("order %v, want it to start %v", got, tc.want)
			}
		})
	}
}

// gangOf returns a job of group g needing n nodes.
func gangOf(id, g string, n int, seq int64) Job {
	return Job{ID: id, Group: g, InstanceCount: n, Seq: seq}
}

func TestFairShareKeepsTheReservationRule(t *testing.T) {
	// b's gang of 3 comes next (b holds nothing) but only 2 nodes are
	// idle: it reserves them, a's small jobs behind it do not start, and
	// the cluster grows for it.
	c := Cluster{Max: 6, Headroom: -1, Queue: fair(), Nodes: append(idleNodes(2), runningNode("r1", "ra", t0)),
		Running: []Running{{ID: "ra", Group: "a"}},
		Queued:  []Job{{ID: "a1", Group: "a", Seq: 1}, {ID: "a2", Group: "a", Seq: 2}, gangOf("b1", "b", 3, 3)}}
	p := Decide(c, t0)
	if len(p.Assign) != 0 {
		t.Errorf("started %v past b's waiting gang job", assigned(p))
	}
	if p.Create != 3 {
		t.Errorf("created %d nodes, want 3 (the gang's one more, a's two)", p.Create)
	}
}

func TestSharesAreMaxMinFair(t *testing.T) {
	// 10 nodes: a wants 2, b and c want plenty, c weighs 2.
	c := Cluster{Max: 10, Queue: fair("c=2"), Queued: append(append(owned("a", 2, 1), owned("b", 20, 10)...), owned("c", 20, 40)...)}
	got := map[string]float64{}
	for _, g := range Groups(c, t0) {
		got[g.Name] = g.Share
	}
	want := map[string]float64{"a": 2, "b": 8.0 / 3, "c": 16.0 / 3}
	for g, w := range want {
		if math.Abs(got[g]-w) > 1e-9 {
			t.Errorf("share of %s %.3f, want %.3f (all: %v)", g, got[g], w, got)
		}
	}
}

func TestFairShareSaysWhyGroupsWait(t *testing.T) {
	// At its maximum of 4 nodes: alice holds 3, bob 1, and both queue
	// more. Their shares are 2 each.
	c := Cluster{Max: 4, Headroom: -1, Queue: fair(),
		Nodes: []Node{runningNode("n1", "ra1", t0), runningNode("n2", "ra2", t0), runningNode("n3", "ra3", t0), runningNode("n4", "rb1", t0)},
		Running: []Running{{ID: "ra1", Group: "alice"}, {ID: "ra2", Group: "alice"}, {ID: "ra3", Group: "alice"},
			{ID: "rb1", Group: "bob"}},
		Queued: append(owned("alice", 2, 10), owned("bob", 2, 20)...)}
	p := Decide(c, t0)
	var share []api.Block
	for _, b := range p.Blocked {
		if b.Kind == api.BlockShare {
			share = append(share, b)
		}
	}
	want := []api.Block{{Kind: api.BlockShare, Group: "alice", Nodes: 3, Share: 2}, {Kind: api.BlockShare, Group: "bob", Nodes: 1, Share: 2}}
	if !reflect.DeepEqual(share, want) {
		t.Fatalf("fair-share reasons %+v, want %+v", share, want)
	}
	if got := share[0].ForJob(nil); !strings.Contains(got, "alice is over its share: 3 of 2 nodes") {
		t.Errorf("alice's jobs say %q", got)
	}
	if got := share[1].ForJob(nil); !strings.Contains(got, "bob is within its share: 1 of 2 nodes") {
		t.Errorf("bob's jobs say %q", got)
	}
	// With nothing waiting beyond what is coming, no reason.
	c.Max = 10
	if p := Decide(c, t0); p.Blocked.Has(api.BlockShare) {
		t.Errorf("growing cluster: reasons %v", p.Blocked)
	}
}

// preemptible is a cluster at its maximum of 4 nodes, all running jobs of
// group a (priority 0) started at t0, with b's waiting job of priority 1.
func preemptible(mode string) Cluster {
	q := fair()
	if mode == api.PreemptLowerPriority {
		q = api.Queue{}
	}
	q.Preemption, q.MinRuntime = mode, 10*time.Minute
	c := Cluster{Max: 4, Headroom: -1, Queue: q}
	for i := range 4 {
		id := fmt.Sprintf("a%d", i+1)
		c.Nodes = append(c.Nodes, runningNode("n"+id, id, t0))
		c.Running = append(c.Running, Running{ID: id, Group: "a", Seq: int64(i + 1), Started: t0.Add(time.Duration(i) * time.Minute)})
	}
	c.Queued = []Job{{ID: "b1", Group: "b", InstanceCount: 1, Seq: 10, Priority: 1}}
	return c
}

func preempted(p Plan) []string {
	var out []string
	for _, x := range p.Preempt {
		out = append(out, x.Job)
	}
	return out
}

func TestPreemption(t *testing.T) {
	later := t0.Add(20 * time.Minute)
	cases := []struct {
		name string
		mode string
		edit func(c *Cluster)
		now  time.Time
		want []string
		wake time.Time
	}{
		{"over share: the newest job of the group over its share", api.PreemptOverShare, nil, later, []string{"a4"}, time.Time{}},
		{"lower priority: the newest of the lowest priority", api.PreemptLowerPriority, nil, later, []string{"a4"}, time.Time{}},
		{"lower priority: the lowest priority first", api.PreemptLowerPriority, func(c *Cluster) {
			c.Running[0].Priority = -1
		}, later, []string{"a1"}, time.Time{}},
		{"lower priority: never an equal priority", api.PreemptLowerPriority, func(c *Cluster) {
			c.Queued[0].Priority = 0
		}, later, nil, time.Time{}},
		{"off: nothing", api.PreemptNone, nil, later, nil, time.Time{}},
		{"minimum runtime: none has run 10 minutes, wake when the first has", api.PreemptOverShare, nil,
			t0.Add(5 * time.Minute), nil, t0.Add(10 * time.Minute)},
		{"minimum runtime: the newest that has", api.PreemptOverShare, nil, t0.Add(11 * time.Minute), []string{"a2"}, time.Time{}},
		{"a job's own minimum runtime", api.PreemptOverShare, func(c *Cluster) {
			c.Running[3].MinRuntime = time.Hour
		}, later, []string{"a3"}, time.Time{}},
		{"a gang: enough jobs for it", api.PreemptOverShare, func(c *Cluster) {
			c.Queued[0].InstanceCount = 2
		}, later, []string{"a4", "a3"}, time.Time{}},
		{"never for a job that would not then fit", api.PreemptOverShare, func(c *Cluster) {
			c.Queued[0].InstanceCount = 3 // its share is 2: a keeps 2
		}, later, nil, time.Time{}},
		{"lower priority: all of them for a job that needs them", api.PreemptLowerPriority, func(c *Cluster) {
			c.Queued[0].InstanceCount = 4
		}, later, []string{"a4", "a3", "a2", "a1"}, time.Time{}},
		{"not while the cluster may grow", api.PreemptOverShare, func(c *Cluster) {
			c.Max = 5
		}, later, nil, time.Time{}},
		{"an idle node serves it: nothing", api.PreemptOverShare, func(c *Cluster) {
			c.Max = 5
			c.Nodes = append(c.Nodes, idleNode("idle", t0))
		}, later, nil, time.Time{}},
		{"a job already stopping serves it: nothing", api.PreemptOverShare, func(c *Cluster) {
			// a4 was preempted: queued again, its node stops it.
			c.Running = c.Running[:3]
			c.Queued = append(c.Queued, Job{ID: "a4", Group: "a", InstanceCount: 1, Seq: 4})
		}, later, nil, time.Time{}},
		{"over share: not from a group within its share", api.PreemptOverShare, func(c *Cluster) {
			// b holds 2, a 2: each at its share of 2.
			c.Running[2].Group, c.Running[3].Group = "b", "b"
		}, later, nil, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := preemptible(tc.mode)
			if tc.edit != nil {
				tc.edit(&c)
			}
			before := cloneCluster(c)
			before.Running = slices.Clone(c.Running)
			p := Decide(c, tc.now)
			if !reflect.DeepEqual(before, c) {
				t.Fatal("Decide modified its input")
			}
			if got := preempted(p); !slices.Equal(got, tc.want) {
				t.Errorf("preempted %v, want %v", got, tc.want)
			}
			if !p.WakeAt.Equal(tc.wake) {
				t.Errorf("wake at %v, want %v", p.WakeAt, tc.wake)
			}
		})
	}
}

func TestPreemptionSaysWhy(t *testing.T) {
	c := preemptible(api.PreemptOverShare)
	p := Decide(c, t0.Add(time.Hour))
	want := []api.Preemption{{Kind: api.PreemptOverShare, Job: "a4", Group: "a", Nodes: 4, Share: 3, For: "b1", ForPriority: 1, ForGroup: "b", ForShare: 1}}
	if !reflect.DeepEqual(p.Preempt, want) {
		t.Fatalf("preempt %+v, want %+v", p.Preempt, want)
	}
	if got := p.Preempt[0].Words(nil); got != "preempted for fair share: a is over its share (4 of 3 nodes) and job b1 of b, within its share (0 of 1 nodes), waits" {
		t.Errorf("words %q", got)
	}
	c = preemptible(api.PreemptLowerPriority)
	p = Decide(c, t0.Add(time.Hour))
	if got := p.Preempt[0].Words(nil); got != "preempted for job b1 of priority 1 (this job's priority is 0)" {
		t.Errorf("words %q", got)
	}
}
