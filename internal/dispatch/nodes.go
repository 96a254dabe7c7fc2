package dispatch

import (
	"context"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// stoppedFromOutside is why a job's attempt ended when its node's machine
// was stopped from outside Cumulus. The agent may say so twice, by a leave
// notice and by its job's exit report, and either may arrive first (a
// control plane that was down hears both at once): both record this.
const stoppedFromOutside = "the node was stopped from outside while the job ran"

// Leave handles a node's agent telling that its machine is going away
// (stopped from outside), inside the caller's transaction. On a
// low-priority cluster that is a preemption: the job is requeued when the
// agent reports it stopped. On a dedicated one the node is unusable and
// its job is requeued now. A node Cumulus itself removes (leaving), or one
// without a job, is not news. It returns the nodes to wake; a node that
// can no longer be evicted returns lifecycle.ErrNotEvictable.
func Leave(ctx context.Context, q store.Querier, nodeID string, r Retries, now time.Time) ([]string, error) {
	wake := []string{nodeID}
	n, err := store.GetNode(ctx, q, nodeID)
	if err != nil || n.State == api.NodeLeaving || n.JobID == "" {
		return wake, err
	}
	if n.Priority == api.PriorityLowPriority {
		_, err := lifecycle.Evict(ctx, q, n.ID, now)
		return wake, err
	}
	if j, err := store.GetJobByUID(ctx, q, n.JobID); err == nil {
		wake = j.Nodes
	}
	return wake, lifecycle.NodeLost(ctx, q, n, api.NodeUnusable, stoppedFromOutside, r.MaxAttempts, now)
}

// Register makes a node's record ready for the agent presenting a join
// token, inside the caller's transaction: a provider's node token for
// the node it made, or a compute's token for a machine joined by hand (a
// new node). It returns the node and the node token the agent uses from
// now on; the join token is spent.
func Register(ctx context.Context, q store.Querier, joinToken string, req agentapi.RegisterRequest, now time.Time) (store.Node, string, error) {
	var node store.Node
	var err error
	switch {
	case strings.HasPrefix(joinToken, prefixJoin):
		node, err = nodeForJoinToken(ctx, q, joinToken)
	case strings.HasPrefix(joinToken, prefixComputeJoin):
		node, err = nodeForComputeJoin(ctx, q, joinToken, now)
	default:
		err = unauthorized("register needs a join token")
	}
	if err != nil {
		return node, "", err
	}
	tok, hash := newNodeToken(node.ID)
	node.TokenHash, node.JoinHash = hash, ""
	node.State, node.Ready, node.IdleSince, node.Heartbeat = api.NodeIdle, now, now, now
	node.Address, node.GPUs = req.Address, nil
	for _, g := range req.GPUs {
		node.GPUs = append(node.GPUs, g.Index)
	}
	return node, tok, store.PutNode(ctx, q, node)
}
