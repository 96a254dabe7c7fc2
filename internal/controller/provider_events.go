package controller

import (
	"context"
	"errors"
	"reflect"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// WatchProvider applies the events of a provider that reports them (see
// provider.Watcher) until ctx ends; for other providers it returns at once
// and heartbeat timeouts notice lost machines instead.
func (c *Clusters) WatchProvider(ctx context.Context) error {
	w, ok := c.Provider.(provider.Watcher)
	if !ok {
		return nil
	}
	return w.Watch(ctx, func(ev provider.Event) {
		if err := c.HandleProviderEvent(ctx, ev); err != nil && ctx.Err() == nil {
			c.Log.Error("provider event", "node", ev.NodeID, "event", ev.Kind, "err", err)
		}
	})
}

// HandleProviderEvent applies one provider event to its node:
//   - Pending: a preparing node records why it still waits (shown on the
//     cluster, and in the provisioning timeout's reason); a reason that is
//     a value of the provider's scheduler (Slurm's) is the cluster's
//     ScaleUpBlocked, and the node waits without a provisioning timeout;
//   - Running: a preparing node's machine is there (the provisioning
//     timeout counts from now);
//   - Terminating: a low-priority node gets its preemption notice (its job
//     has the grace period to stop and is requeued);
//   - Gone: a low-priority node is preempted (job requeued, no retry
//     used); any other node becomes unusable (job requeued) and is replaced.
//
// Nodes the controller is removing itself, and nodes already lost, are
// left alone, so repeated and late events change nothing, except that a
// Gone with the provider's reason for a node its agent said was stopped
// from outside adds that reason to the attempt the node's loss ended
// (lifecycle.ExplainLoss).
func (c *Clusters) HandleProviderEvent(ctx context.Context, ev provider.Event) error {
	now := c.Clock.Now().UTC()
	changed := false
	neverReady := "" // the compute of a preparing node whose machine went away
	err := c.DB.Tx(ctx, func(q store.Querier) error {
		neverReady = ""
		n, err := store.GetNode(ctx, q, ev.NodeID)
		if err != nil {
			return err
		}
		switch n.State {
		case api.NodeLeaving, api.NodeUnusable, api.NodePreempted:
			if ev.Kind == provider.EventGone && ev.Reason != "" {
				// Its agent told first (SIGTERM); now the provider says why.
				return lifecycle.ExplainLoss(ctx, q, n, ev.Reason)
			}
			return nil
		}
		switch ev.Kind {
		case provider.EventPending:
			if n.State != api.NodePreparing {
				return nil
			}
			if ev.Wait != nil { // the scheduler's reason, a value: the cluster's ScaleUpBlocked says it
				if reflect.DeepEqual(n.Wait, ev.Wait) {
					return nil
				}
				n.Wait, changed = ev.Wait, true
				return store.PutNode(ctx, q, n)
			}
			if n.Reason == ev.Reason {
				return nil
			}
			n.Reason, changed = ev.Reason, true
			return store.PutNode(ctx, q, n)
		case provider.EventRunning:
			if n.State != api.NodePreparing {
				return nil
			}
			// Its machine is there: it no longer waits in the provider's
			// queue, and its agent has the provisioning timeout from now.
			n.Wait, n.Allocated, changed = nil, now, true
			return store.PutNode(ctx, q, n)
		case provider.EventTerminating:
			if n.Priority != api.PriorityLowPriority || !n.Evicted.IsZero() {
				return nil
			}
			changed = true
			_, err := lifecycle.Evict(ctx, q, n.ID, now)
			return err
		case provider.EventGone:
			changed = true
			if n.State == api.NodePreparing {
				neverReady = n.Compute
			}
			return lifecycle.MachineGone(ctx, q, n, ev.Reason, c.MaxAttempts, c.MaxPreemptions, now)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // a node already removed
	}
	if err != nil {
		return err
	}
	if neverReady != "" {
		c.Metrics.ProvisionFailed(neverReady, metrics.ReasonGone)
	}
	if changed {
		c.Log.Info("provider event", "node", ev.NodeID, "event", ev.Kind, "reason", ev.Reason)
		c.Hub.Wake(ev.NodeID) // a held poll hears of an eviction now
		c.Notify()
	}
	return nil
}
