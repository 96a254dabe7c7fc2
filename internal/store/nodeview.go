package store

import (
	"slices"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// nodeView holds the nodes as this process last wrote or read them
// (rowView): every poll of every agent reads its node (to authenticate it
// and to decide its instructions), and those reads were a fifth of the
// control plane's CPU with thousands of busy nodes, most of it a reader
// connection's look into the WAL and the decoding of the document.
type nodeView = rowView[Node]

// nodeChange is one write of a node: the node as written (put), its claim
// by a job (claimed: the fields ClaimIdleNodes edits), or, neither set,
// its removal.
type nodeChange = rowChange[Node]

func newNodeView() *nodeView { return newRowView(ownNode, nil, 0) }

// claimed is the change ClaimIdleNodes makes to a node it claims for a job.
func claimed(job string) func(Node) Node {
	return func(n Node) Node {
		n.State, n.JobID = api.NodeRunning, job
		return n
	}
}

// ownNode copies a node's slices and pointers, so that neither the view
// nor its callers see the other change a node in place.
func ownNode(n Node) Node {
	n.GPUs = slices.Clone(n.GPUs)
	n.GPUDevices = slices.Clone(n.GPUDevices)
	if n.Wait != nil {
		w := *n.Wait
		n.Wait = &w
	}
	return n
}
