package store

import (
	"slices"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// nodeView holds the nodes as this process last wrote or read them, so
// that a read outside a transaction (Q) of one node is answered without
// SQL: every poll of every agent reads its node (to authenticate it and to
// decide its instructions), and those reads were a fifth of the control
// plane's CPU with thousands of busy nodes, most of it a reader
// connection's look into the WAL and the decoding of the document.
//
// The writer keeps it: a transaction's node writes are applied to the
// view once it has committed (discarded when it rolls back), a single
// write outside a transaction (W) at once. It is right only while this
// process is the only writer of the store, so it is kept for SQLite
// alone, which one server serves; PostgreSQL's replicas write the same
// rows from several processes and always read them.
//
// A read that raced a write is not kept: a reader that began before a
// write was applied may have read the row as it was before it, so its
// node is kept only if no write of that node was applied since the read
// began (written, by the view's generation).
type nodeView struct {
	mu    sync.Mutex
	nodes map[string]Node   // node id → the node as committed
	gen   uint64            // writes applied so far
	wrote map[string]uint64 // node id → gen of its last applied write
	// floor is the gen when wrote was last emptied: a read that began
	// before it cannot tell whether it raced a write, and is not kept.
	floor uint64
}

// maxWrote bounds how many nodes' last writes the view remembers (their
// ids, for reads racing them) before it forgets them all at once.
const maxWrote = 1 << 16

func newNodeView() *nodeView {
	return &nodeView{nodes: map[string]Node{}, wrote: map[string]uint64{}}
}

// nodeChange is one write of a node, applied to the view when it is
// committed: the node as written (put), its claim by a job (claimBy: the
// fields ClaimIdleNodes edits), or, neither set, its removal.
type nodeChange struct {
	id      string
	put     *Node
	claimBy string
}

// get returns a copy of the node as the view holds it.
func (v *nodeView) get(id string) (Node, bool) {
	v.mu.Lock()
	n, ok := v.nodes[id]
	v.mu.Unlock()
	return ownNode(n), ok
}

// begin is the view's generation before a read from SQL, for fill.
func (v *nodeView) begin() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// fill keeps a node read from SQL by a read that began at generation
// from, unless a write of that node was applied since.
func (v *nodeView) fill(n Node, from uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if from < v.floor || v.wrote[n.ID] > from {
		return
	}
	if _, ok := v.nodes[n.ID]; !ok {
		v.nodes[n.ID] = ownNode(n)
	}
}

// apply applies committed writes, in the order they were made.
func (v *nodeView) apply(changes []nodeChange) {
	if v == nil || len(changes) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range changes {
		v.gen++
		v.wrote[c.id] = v.gen
		switch {
		case c.put != nil:
			v.nodes[c.id] = ownNode(*c.put)
		case c.claimBy != "":
			if n, ok := v.nodes[c.id]; ok {
				n.State, n.JobID = api.NodeRunning, c.claimBy
				v.nodes[c.id] = n
			}
		default:
			delete(v.nodes, c.id)
		}
	}
	if len(v.wrote) > maxWrote {
		clear(v.wrote)
		v.floor = v.gen
	}
}

// applyOne applies one committed write.
func (v *nodeView) applyOne(c nodeChange) { v.apply([]nodeChange{c}) }

// forget drops what the view holds of these nodes: writes whose commit
// failed may or may not be in the store.
func (v *nodeView) forget(changes []nodeChange) {
	if v == nil || len(changes) == 0 {
		return
	}
	forgotten := make([]nodeChange, len(changes))
	for i, c := range changes {
		forgotten[i] = nodeChange{id: c.id}
	}
	v.apply(forgotten)
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
