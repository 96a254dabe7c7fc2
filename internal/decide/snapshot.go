package decide

import (
	"cmp"
	"slices"
	"strings"
)

// limits returns the cluster's node bounds made consistent: the maximum is
// the hard cap, so a negative Max counts as 0 and a Min above Max counts as
// Max.
func limits(c Cluster) (lo, hi int) {
	hi = max(c.Max, 0)
	lo = min(max(c.Min, 0), hi)
	return lo, hi
}

// need is the number of nodes a job takes; a count below 1 counts as 1.
func need(j *Job) int { return max(j.InstanceCount, 1) }

// view is a cluster's nodes split by what the decisions may do with them.
// The groups hold indices into nodes, which is never modified; sorting
// indices rather than Node values keeps the work cheap.
type view struct {
	nodes     []Node
	idle      []int // most recently idle first: scheduling takes from the front, scale-down from the back
	preparing []int // input order
	busy      []int // input order
	exiting   []int // leaving, preempted, unusable: not live; input order
	// order is the queue in scheduling order (indices into the cluster's
	// Queued; see orderOf); nil takes queueOrder.
	order []int
}

// queue is the cluster's queue in scheduling order.
func (v *view) queue(c Cluster) []int {
	if v.order == nil {
		return queueOrder(c.Queued)
	}
	return v.order
}

func (v *view) live() int { return len(v.idle) + len(v.preparing) + len(v.busy) }

// Node classes, in the order of view's groups.
const (
	classIdle = iota
	classPreparing
	classBusy
	classExiting
)

// newView classifies the cluster's nodes (see the package comment) and
// orders the idle ones. The four groups share one allocation.
func newView(c Cluster) view {
	nodes := c.Nodes
	requeued := requeuedJobs(c)
	var count [4]int
	for i := range nodes {
		count[classOf(&nodes[i], requeued)]++
	}
	all := make([]int, len(nodes))
	v := view{nodes: nodes}
	groups := [4]*[]int{&v.idle, &v.preparing, &v.busy, &v.exiting}
	at := 0
	for k, g := range groups {
		*g = all[at : at : at+count[k]]
		at += count[k]
	}
	for i := range nodes {
		g := groups[classOf(&nodes[i], requeued)]
		*g = append(*g, i)
	}
	v.sort(v.idle, recentlyIdleFirst)
	return v
}

// classOf is a node's class. requeued holds the queued jobs that nodes
// still name (see requeuedJobs).
func classOf(n *Node, requeued map[string]bool) int {
	switch {
	case n.State == NodeLeaving || n.State == NodePreempted || n.State == NodeUnusable:
		return classExiting
	case n.State == NodeRunning && requeued[n.JobID]:
		// Its job went back to the queue (another of its nodes was lost,
		// or it was preempted): the node is idle once its agent has
		// stopped the old attempt. Capacity on its way, like a node being
		// prepared, so no extra node is created for it.
		return classPreparing
	case n.JobID != "":
		return classBusy
	case n.State == NodeIdle && n.SSHOpen:
		return classBusy // someone is logged in: not given work, not scaled down
	case n.State == NodeIdle:
		return classIdle
	case n.State == NodePreparing:
		return classPreparing
	default: // running without a job, or a state we do not know: keep it
		return classBusy
	}
}

// requeuedJobs is the set of queued jobs that a running node still names;
// nil when there is none.
func requeuedJobs(c Cluster) map[string]bool {
	if len(c.Queued) == 0 {
		return nil
	}
	var set map[string]bool
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.State != NodeRunning || n.JobID == "" {
			continue
		}
		if set == nil {
			set = make(map[string]bool, len(c.Queued))
			for j := range c.Queued {
				set[c.Queued[j].ID] = true
			}
		}
		if set[n.JobID] {
			return set
		}
	}
	return nil
}

// sort orders a group of node indices by the nodes they name.
func (v *view) sort(group []int, order func(a, b *Node) int) {
	slices.SortFunc(group, func(a, b int) int { return order(&v.nodes[a], &v.nodes[b]) })
}

// reapable reports whether an exiting node can be deleted now: preempted and
// unusable nodes always, leaving nodes once their job has ended.
func reapable(n *Node) bool { return n.State != NodeLeaving || n.JobID == "" }

// queueOrder returns the indices of q in scheduling order: priority
// descending, then Seq, then ID.
func queueOrder(q []Job) []int {
	order := make([]int, len(q))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return jobOrder(&q[a], &q[b]) })
	return order
}

func jobOrder(a, b *Job) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// recentlyIdleFirst orders idle nodes by IdleSince descending, then ID.
func recentlyIdleFirst(a, b *Node) int {
	if c := b.IdleSince.Compare(a.IdleSince); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// newestFirst orders nodes by Created descending, then ID.
func newestFirst(a, b *Node) int {
	if c := b.Created.Compare(a.Created); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func byID(a, b *Node) int { return strings.Compare(a.ID, b.ID) }
