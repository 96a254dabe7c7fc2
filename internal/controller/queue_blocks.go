package controller

import (
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// queueBlocks are why the cluster's new nodes wait in the queue of the
// scheduler the provider hands them to (Slurm's reasons, values the
// provider read), one reason per wait, with how many nodes wait for it, in
// the order of their first node.
func queueBlocks(nodes []store.Node) api.Blocks {
	var out api.Blocks
	for _, n := range nodes {
		if n.State != api.NodePreparing || n.Wait == nil {
			continue
		}
		found := false
		for i := range out {
			if *out[i].Wait == *n.Wait {
				out[i].Nodes++
				found = true
			}
		}
		if !found {
			w := *n.Wait
			out = append(out, api.Block{Kind: api.BlockQueued, Wait: &w, Nodes: 1})
		}
	}
	return out
}
