package api

// Node states as Azure writes them in listNodes (lower case).
const (
	NodePreparing = "preparing"
	NodeIdle      = "idle"
	NodeRunning   = "running"
	NodeLeaving   = "leaving"
	NodePreempted = "preempted"
	NodeUnusable  = "unusable"
)

// NodeInfo is one AmlComputeNodeInformation row of listNodes.
type NodeInfo struct {
	NodeID           string  `json:"nodeId"`
	PrivateIPAddress string  `json:"privateIpAddress,omitempty"`
	PublicIPAddress  *string `json:"publicIpAddress"`
	Port             int32   `json:"port,omitempty"`
	NodeState        string  `json:"nodeState"`
	RunID            *string `json:"runId"`
	// RankEnded (a Cumulus extension): the node's rank of its job (runId)
	// has ended while other ranks still run. The node stays the job's —
	// running, given no other work and not scaled down — until the whole
	// job ends, as Azure ML keeps a job's nodes.
	RankEnded bool `json:"rankEnded,omitempty"`
	// GPUs are the devices the node holds (a Cumulus extension): the
	// machine's devices it was given where the nodes share one machine
	// ("0", "2:1" for a MIG instance), else those its agent reported.
	GPUs []string `json:"gpus,omitempty"`
}

// NodesPage is the listNodes answer (its items are under "nodes").
type NodesPage struct {
	Nodes    []NodeInfo `json:"nodes"`
	NextLink string     `json:"nextLink,omitempty"`
}

// Count adds one node in the given state to the counts.
func (n *NodeStateCounts) Count(state string) { n.Add(state, 1) }

// Add adds k nodes in the given state to the counts.
func (n *NodeStateCounts) Add(state string, k int32) {
	switch state {
	case NodeIdle:
		n.IdleNodeCount += k
	case NodeRunning:
		n.RunningNodeCount += k
	case NodePreparing:
		n.PreparingNodeCount += k
	case NodeUnusable:
		n.UnusableNodeCount += k
	case NodeLeaving:
		n.LeavingNodeCount += k
	case NodePreempted:
		n.PreemptedNodeCount += k
	}
}

// CountNodes turns node counts by state into NodeStateCounts and the
// total.
func CountNodes(byState map[string]int) (NodeStateCounts, int32) {
	var c NodeStateCounts
	var total int32
	for state, n := range byState {
		c.Add(state, int32(n))
		total += int32(n)
	}
	return c, total
}

// AllocationStateOf is Resizing while a cluster is growing or shrinking
// towards its target, Steady otherwise.
func AllocationStateOf(current, target int32, n NodeStateCounts) string {
	if current != target || n.PreparingNodeCount > 0 || n.LeavingNodeCount > 0 {
		return AllocationResizing
	}
	return AllocationSteady
}
