package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const propertyCases = 20000

// randomCluster draws a small cluster snapshot. Running nodes always carry a
// job (as the controller records them); everything else is drawn freely,
// including bad bounds and jobs bigger than max.
func randomCluster(r *rand.Rand) (Cluster, time.Time) {
	c := Cluster{
		ID:          "c",
		Min:         r.IntN(4),
		IdleTimeout: []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute}[r.IntN(4)],
		Headroom:    r.IntN(6) - 1,
	}
	c.Max = c.Min + r.IntN(7)
	if r.IntN(10) == 0 {
		c.Max = r.IntN(3) // sometimes below Min
	}
	minute := func(n int) time.Time { return t0.Add(time.Duration(r.IntN(n)) * time.Minute) }
	states := []string{NodeIdle, NodeIdle, NodeIdle, NodeRunning, NodeRunning, NodePreparing, NodeLeaving, NodePreempted, NodeUnusable}
	for i := range r.IntN(13) {
		n := Node{ID: fmt.Sprintf("n%02d", i), State: states[r.IntN(len(states))], Created: minute(60).Add(-time.Hour)}
		switch n.State {
		case NodeIdle:
			n.IdleSince = minute(30)
		case NodeRunning:
			n.JobID = fmt.Sprintf("r%02d", i)
		case NodeLeaving, NodePreempted, NodePreparing:
			if r.IntN(2) == 0 {
				n.JobID = fmt.Sprintf("r%02d", i)
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	if r.IntN(3) == 0 { // a GPU size on a machine the clusters share
		g := &GPUs{PerNode: 1 + r.IntN(4), Total: r.IntN(9)}
		g.Free = r.IntN(g.Total + 1)
		if r.IntN(3) == 0 {
			g.Wanted = 1 + r.IntN(4)
		}
		c.GPUs = g
	}
	for i := range r.IntN(9) {
		c.Queued = append(c.Queued, Job{
			ID:            fmt.Sprintf("j%02d", i),
			InstanceCount: r.IntN(6),
			Priority:      r.IntN(3),
			Seq:           int64(r.IntN(20)),
		})
	}
	return c, minute(45)
}

func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range propertyCases {
		c, now := randomCluster(r)
		before := cloneCluster(c)
		p := Decide(c, now)
		if !reflect.DeepEqual(before, c) {
			t.Fatalf("case %d: Decide modified its input", i)
		}
		// Decide is Schedule, then Autoscale on the snapshot with the
		// assignments applied.
		want := Autoscale(ApplyAssignments(c, Schedule(c)), now)
		want.Assign = Schedule(c)
		if !samePlan(p, want) {
			t.Fatalf("case %d: Decide %s\nSchedule then Autoscale %s", i, show(p), show(want))
		}
		if err := checkInvariants(c, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
		if err := checkStable(c, now, p, r); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
	}
}

func TestAutoscaleProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range propertyCases {
		c, now := randomCluster(r)
		p := Autoscale(c, now)
		if len(p.Assign) != 0 {
			t.Fatalf("case %d: Autoscale assigned %v", i, p.Assign)
		}
		if err := checkInvariants(c, now, p); err != nil {
			t.Fatalf("case %d: %v\ncluster %+v\nnow t0+%v\nplan %s", i, err, c, now.Sub(t0), show(p))
		}
	}
}

// checkInvariants checks p against the rules of the package comment for the
// snapshot c. p.Assign may be empty (a Plan from Autoscale alone).
func checkInvariants(c Cluster, now time.Time, p Plan) error {
	lo, hi := limits(c)
	byNode := make(map[string]Node, len(c.Nodes))
	for _, n := range c.Nodes {
		byNode[n.ID] = n
	}
	byJob := make(map[string]Job, len(c.Queued))
	for _, j := range c.Queued {
		byJob[j.ID] = j
	}

	// Assignments: idle nodes only, each once, gangs whole.
	assigned := map[string]bool{}
	started := map[string]bool{}
	for _, a := range p.Assign {
		j, ok := byJob[a.JobID]
		if !ok || started[a.JobID] {
			return fmt.Errorf("job %q assigned but not queued, or twice", a.JobID)
		}
		started[a.JobID] = true
		if len(a.NodeIDs) != need(&j) || need(&j) > hi {
			return fmt.Errorf("job %q needs %d nodes (max %d), got %v", j.ID, j.InstanceCount, hi, a.NodeIDs)
		}
		for _, id := range a.NodeIDs {
			n, ok := byNode[id]
			if !ok || n.State != NodeIdle || n.JobID != "" {
				return fmt.Errorf("node %q assigned but not an idle node", id)
			}
			if assigned[id] {
				return fmt.Errorf("node %q assigned twice", id)
			}
			assigned[id] = true
		}
	}

	after := ApplyAssignments(c, p.Assign)
	nodes := newView(after)
	live := nodes.live()
	overMax := live > hi
	demand, _ := demandOf(after.Queued, hi)

	// Removals and drains.
	seen := map[string]bool{}
	removedLive, removedIdle := 0, 0
	for _, id := range p.Remove {
		n, ok := byNode[id]
		switch {
		case !ok:
			return fmt.Errorf("removed unknown node %q", id)
		case seen[id]:
			return fmt.Errorf("node %q removed twice", id)
		case assigned[id]:
			return fmt.Errorf("node %q removed in the pass that assigned it", id)
		}
		seen[id] = true
		switch {
		case n.State == NodePreempted || n.State == NodeUnusable:
		case n.State == NodeLeaving:
			if n.JobID != "" {
				return fmt.Errorf("leaving node %q removed while running %q", id, n.JobID)
			}
		case n.JobID != "":
			return fmt.Errorf("node %q removed while running %q", id, n.JobID)
		case n.State == NodePreparing:
			if !overMax {
				return fmt.Errorf("preparing node %q removed but not over max", id)
			}
			removedLive++
		case n.State == NodeIdle:
			if !overMax && now.Before(n.IdleSince.Add(max(c.IdleTimeout, 0))) && (c.GPUs == nil || c.GPUs.Wanted == 0) {
				return fmt.Errorf("idle node %q removed before its timeout", id)
			}
			removedLive++
			removedIdle++
		default:
			return fmt.Errorf("node %q in state %q removed", id, n.State)
		}
	}
	for _, i := range nodes.exiting {
		if n := &nodes.nodes[i]; reapable(n) && !seen[n.ID] {
			return fmt.Errorf("node %q (%s) not removed", n.ID, n.State)
		}
	}
	for _, id := range p.Drain {
		n, ok := byNode[id]
		switch {
		case !ok:
			return fmt.Errorf("drained unknown node %q", id)
		case seen[id]:
			return fmt.Errorf("node %q drained twice or drained and removed", id)
		case assigned[id]:
			return fmt.Errorf("node %q drained in the pass that assigned it", id)
		case !overMax:
			return fmt.Errorf("node %q drained but not over max", id)
		case n.State != NodeRunning && n.JobID == "":
			return fmt.Errorf("drained node %q is not busy", id)
		}
		seen[id] = true
	}

	// Counts.
	kept := live - removedLive - len(p.Drain)
	switch {
	case p.Create < 0:
		return fmt.Errorf("negative create")
	case c.Headroom >= 0 && p.Create > c.Headroom:
		return fmt.Errorf("create %d over headroom %d", p.Create, c.Headroom)
	case p.Target != kept+p.Create:
		return fmt.Errorf("target %d, want kept %d + create %d", p.Target, kept, p.Create)
	case p.Target > hi:
		return fmt.Errorf("target %d over max %d", p.Target, hi)
	case kept < min(lo, live):
		return fmt.Errorf("kept %d of %d live nodes, below min %d", kept, live, lo)
	case c.Headroom < 0 && p.GPUShort == 0 && p.Target < lo:
		return fmt.Errorf("target %d below min %d with unlimited quota", p.Target, lo)
	case p.Create > 0 && removedLive > 0:
		return fmt.Errorf("creates and removes live nodes in one plan")
	case !p.WakeAt.IsZero() && !p.WakeAt.After(now):
		return fmt.Errorf("WakeAt %v not after now", p.WakeAt)
	case !overMax && len(nodes.idle)-removedIdle < min(len(nodes.idle), demand):
		return fmt.Errorf("removed idle nodes the queue needs (demand %d)", demand)
	case len(p.Blocked) == 0 && demand > 0 && p.Target < len(nodes.busy)+demand:
		return fmt.Errorf("demand %d not met by target %d and not blocked", demand, p.Target)
	}
	if err := checkGPUs(c, now, p, overMax); err != nil {
		return err
	}
	return checkQuotaWait(c, p, started, hi)
}

// checkGPUs checks the device rules: never more new nodes than the free
// devices hold; GPUShort, GPUBlock and GPUWait set exactly when devices
// cut Create; idle nodes released early for other clusters only as many
// as free what they wait for.
func checkGPUs(c Cluster, now time.Time, p Plan, overMax bool) error {
	g := c.GPUs
	if g == nil || g.PerNode <= 0 {
		if p.GPUShort != 0 || p.Blocked.Has(api.BlockGPUs) || len(p.GPUWait) > 0 {
			return fmt.Errorf("GPU fields set without a GPU supply: %d %v %v", p.GPUShort, p.Blocked, p.GPUWait)
		}
		return nil
	}
	switch {
	case p.Create*g.PerNode > g.Free:
		return fmt.Errorf("creates %d nodes of %d GPUs with %d free", p.Create, g.PerNode, g.Free)
	case (p.GPUShort > 0) != p.Blocked.Has(api.BlockGPUs):
		return fmt.Errorf("GPUShort %d but Blocked %v", p.GPUShort, p.Blocked)
	case p.GPUShort > 0 && (p.Create+1)*g.PerNode <= g.Free:
		return fmt.Errorf("GPUShort %d but room for another node", p.GPUShort)
	case p.GPUShort == 0 && len(p.GPUWait) > 0:
		return fmt.Errorf("jobs wait for GPUs that do not bind: %v", p.GPUWait)
	}
	early := 0
	for _, id := range p.Remove {
		for _, n := range c.Nodes {
			if n.ID == id && n.State == NodeIdle && n.JobID == "" && now.Before(n.IdleSince.Add(max(c.IdleTimeout, 0))) {
				early++
			}
		}
	}
	if release := (g.Wanted + g.PerNode - 1) / g.PerNode; early > release && !overMax {
		return fmt.Errorf("released %d idle nodes early for %d GPUs wanted (%d a node)", early, g.Wanted, g.PerNode)
	}
	short := 0
	for _, w := range p.GPUWait {
		short += w.Nodes
	}
	if short > p.GPUShort {
		return fmt.Errorf("jobs short of %d nodes for GPUs; devices cut %d", short, p.GPUShort)
	}
	return nil
}

// checkQuotaWait checks QuotaShort and QuotaWait: they are set exactly when
// Headroom cut Create; every waiting job is queued, not started, can run,
// is listed once and short of 1..its need; the jobs short of nodes never
// need more than the nodes quota cut and maxNodeCount leaves.
func checkQuotaWait(c Cluster, p Plan, started map[string]bool, hi int) error {
	cut := c.Headroom >= 0 && p.Create+p.GPUShort == c.Headroom && p.QuotaShort > 0
	switch {
	case p.QuotaShort < 0:
		return fmt.Errorf("negative QuotaShort %d", p.QuotaShort)
	case (p.QuotaShort > 0) != p.Blocked.Has(api.BlockQuota):
		return fmt.Errorf("QuotaShort %d but Blocked %v", p.QuotaShort, p.Blocked)
	case p.QuotaShort > 0 && !cut:
		return fmt.Errorf("QuotaShort %d without Create cut to Headroom %d", p.QuotaShort, c.Headroom)
	case !cut && len(p.QuotaWait) > 0:
		return fmt.Errorf("jobs wait for quota that does not bind: %v", p.QuotaWait)
	}
	byJob := make(map[string]Job, len(c.Queued))
	for _, j := range c.Queued {
		byJob[j.ID] = j
	}
	seen := map[string]bool{}
	short := 0
	for _, w := range p.QuotaWait {
		j, ok := byJob[w.JobID]
		switch {
		case !ok || seen[w.JobID]:
			return fmt.Errorf("job %q waits for quota but is not queued, or is listed twice", w.JobID)
		case started[w.JobID]:
			return fmt.Errorf("job %q waits for quota but was assigned", w.JobID)
		case need(&j) > hi:
			return fmt.Errorf("job %q can never run but waits for quota", w.JobID)
		case w.Nodes < 1 || w.Nodes > need(&j):
			return fmt.Errorf("job %q short of %d nodes, needs %d", w.JobID, w.Nodes, need(&j))
		}
		seen[w.JobID] = true
		short += w.Nodes
	}
	if short > p.QuotaShort || p.Target+short > hi {
		return fmt.Errorf("jobs short of %d nodes; quota cut %d, target %d, max %d", short, p.QuotaShort, p.Target, hi)
	}
	return nil
}

// checkStable checks that p does not depend on input order, holds until
// WakeAt and changes at it, and is a fixed point once applied.
func checkStable(c Cluster, now time.Time, p Plan, r *rand.Rand) error {
	shuffled := cloneCluster(c)
	r.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
	r.Shuffle(len(shuffled.Queued), func(i, j int) { shuffled.Queued[i], shuffled.Queued[j] = shuffled.Queued[j], shuffled.Queued[i] })
	if q := Decide(shuffled, now); !samePlan(q, p) {
		return fmt.Errorf("input order changed the plan: %s", show(q))
	}

	if p.WakeAt.IsZero() {
		if q := Decide(c, now.Add(24*time.Hour)); !samePlan(q, p) {
			return fmt.Errorf("no WakeAt but the plan changed a day later: %s", show(q))
		}
	} else {
		until := p.WakeAt.Sub(now)
		at := now.Add(time.Duration(r.Int64N(int64(until))))
		if q := Decide(c, at); !samePlan(q, p) {
			return fmt.Errorf("plan changed before WakeAt, at t0+%v: %s", at.Sub(t0), show(q))
		}
		if q := Decide(c, p.WakeAt); len(q.Remove) <= len(p.Remove) {
			return fmt.Errorf("nothing more removed at WakeAt: %s", show(q))
		}
	}

	next := applyPlan(c, now, p)
	q := Decide(next, now)
	if len(q.Assign) != 0 || q.Create != 0 || len(q.Remove) != 0 || len(q.Drain) != 0 || q.Target != p.Target {
		return fmt.Errorf("plan is not a fixed point; next pass: %s", show(q))
	}
	return nil
}

// applyPlan does to c what a controller would do with p.
func applyPlan(c Cluster, now time.Time, p Plan) Cluster {
	c = ApplyAssignments(c, p.Assign)
	var nodes []Node
	for _, n := range c.Nodes {
		switch {
		case slices.Contains(p.Remove, n.ID):
			continue
		case slices.Contains(p.Drain, n.ID):
			n.State = NodeLeaving
		}
		nodes = append(nodes, n)
	}
	for i := range p.Create {
		nodes = append(nodes, preparingNode(fmt.Sprintf("new%02d", i), now))
	}
	c.Nodes = nodes
	if c.Headroom >= 0 {
		c.Headroom -= p.Create
	}
	if g := c.GPUs; g != nil && g.PerNode > 0 {
		// New nodes take devices; the nodes removed free theirs for the
		// clusters that wanted them (the pool gives them to those).
		ng := *g
		ng.Free -= p.Create * g.PerNode
		ng.Wanted = max(ng.Wanted-(len(p.Remove))*g.PerNode, 0)
		c.GPUs = &ng
	}
	return c
}
