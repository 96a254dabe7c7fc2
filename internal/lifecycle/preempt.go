package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// DefaultMaxPreemptions stops a job that is preempted again and again.
const DefaultMaxPreemptions = 10

// ErrNotEvictable is returned for a node that cannot be preempted.
var ErrNotEvictable = errors.New("node cannot be evicted")

// Evict records a preemption notice for a node. A node without a job is
// preempted at once; a node with one keeps running it for the grace period
// (its agent stops the job and reports, see Preempted). Evicting a node
// already evicted changes nothing.
func Evict(ctx context.Context, q store.Querier, nodeID string, at time.Time) (store.Node, error) {
	n, err := store.GetNode(ctx, q, nodeID)
	if err != nil {
		return n, err
	}
	if !n.Evicted.IsZero() || n.State == api.NodePreempted {
		return n, nil
	}
	switch n.State {
	case api.NodeIdle, api.NodeRunning, api.NodePreparing, api.NodeLeaving:
	default:
		return n, fmt.Errorf("node %s is %s: %w", n.ID, n.State, ErrNotEvictable)
	}
	n.Evicted = at
	n.Reason = "preempted at " + at.UTC().Format(time.RFC3339)
	if n.JobID == "" {
		n.State, n.Changed = api.NodePreempted, at
	}
	return n, store.PutNode(ctx, q, n)
}

// MachineGone handles a node whose machine went away under it from
// outside Cumulus (a pod deleted, an agent stopped): on a low-priority
// cluster that is a preemption (the job is requeued without using a
// retry), otherwise the node is unusable and its job requeued as a new
// attempt.
func MachineGone(ctx context.Context, q store.Querier, n store.Node, reason string, maxAttempts, maxPreemptions int, at time.Time) error {
	if n.Priority == api.PriorityLowPriority {
		return Preempted(ctx, q, n.ID, maxPreemptions, at)
	}
	return NodeLost(ctx, q, n, api.NodeUnusable, reason, maxAttempts, at)
}

// Preempted ends a preempted node's part in its job: the node becomes
// preempted (and is removed), and the job — every rank of it — goes back
// to the queue with the reason, without using one of its failure retries.
// A job preempted maxPreemptions times fails, unless it was asked to
// cancel: then it ends canceled, as Requeue ends it.
func Preempted(ctx context.Context, q store.Querier, nodeID string, maxPreemptions int, at time.Time) error {
	n, err := store.GetNode(ctx, q, nodeID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	j, ok, err := detach(ctx, q, n, api.NodePreempted, at)
	if err != nil || !ok {
		return err
	}
	j.Preemptions++
	reason := "preempted on node " + nodeID
	if maxPreemptions > 0 && j.Preemptions >= maxPreemptions && j.Doc.Properties.Status != api.JobCancelRequested {
		return endAttemptFailed(ctx, q, j, reason, fmt.Sprintf("%s; preempted %d times, giving up", reason, j.Preemptions), at)
	}
	return Requeue(ctx, q, j, reason, 0, at)
}
