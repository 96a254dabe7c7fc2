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
}

// NodesPage is the listNodes answer (its items are under "nodes").
type NodesPage struct {
	Nodes    []NodeInfo `json:"nodes"`
	NextLink string     `json:"nextLink,omitempty"`
}

// Count adds one node in the given state to the counts.
func (n *NodeStateCounts) Count(state string) {
	switch state {
	case NodeIdle:
		n.IdleNodeCount++
	case NodeRunning:
		n.RunningNodeCount++
	case NodePreparing:
		n.PreparingNodeCount++
	case NodeUnusable:
		n.UnusableNodeCount++
	case NodeLeaving:
		n.LeavingNodeCount++
	case NodePreempted:
		n.PreemptedNodeCount++
	}
}

// AllocationStateOf is Resizing while a cluster is growing or shrinking
// towards its target, Steady otherwise.
func AllocationStateOf(current, target int32, n NodeStateCounts) string {
	if current != target || n.PreparingNodeCount > 0 || n.LeavingNodeCount > 0 {
		return AllocationResizing
	}
	return AllocationSteady
}
