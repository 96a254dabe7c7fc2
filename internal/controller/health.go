package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// checkHealth marks nodes unusable that stopped heartbeating or never
// finished provisioning; their jobs are requeued. It returns when the next
// check could change something, and whether it wrote anything.
func (c *Clusters) checkHealth(ctx context.Context, nodes []store.Node, now time.Time) (time.Time, bool, error) {
	changed := false
	var wakeAt time.Time
	var errs []error
	for _, n := range nodes {
		var deadline time.Time
		var reason string
		switch n.State {
		case api.NodePreparing:
			if n.Wait != nil {
				continue // it waits in the provider's scheduler's queue, which says why (ScaleUpBlocked)
			}
			deadline = n.Created.Add(c.ProvisionTimeout)
			if n.Allocated.After(n.Created) { // its machine came later (it waited in a queue)
				deadline = n.Allocated.Add(c.ProvisionTimeout)
			}
			reason = fmt.Sprintf("provisioning timed out: the node's agent did not register within %s", c.ProvisionTimeout)
			if n.Reason != "" {
				reason += "; last seen: " + n.Reason // the provider's word, e.g. the pod is unschedulable
			}
		case api.NodeIdle, api.NodeRunning, api.NodeLeaving:
			if n.State == api.NodeLeaving && n.JobID == "" {
				continue // on its way out already
			}
			deadline = c.lastHeard(n, now).Add(c.HeartbeatTimeout)
			reason = fmt.Sprintf("no heartbeat for %s", c.HeartbeatTimeout)
		default:
			continue
		}
		if now.Before(deadline) {
			wakeAt = earliest(wakeAt, deadline)
			continue
		}
		changed = true
		err := c.DB.Tx(ctx, func(q store.Querier) error {
			cur, err := store.GetNode(ctx, q, n.ID)
			if err != nil || cur.State != n.State {
				return err
			}
			return lifecycle.NodeLost(ctx, q, cur, api.NodeUnusable, reason, c.MaxAttempts, now)
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if n.State == api.NodePreparing {
			c.fail(n.Compute, "node "+n.ID+": "+reason, now)
			c.Metrics.ProvisionFailed(n.Compute, metrics.ReasonTimeout)
		}
		c.Log.Warn("node unusable", "node", n.ID, "compute", n.Compute, "reason", reason, "job", n.JobID)
	}
	return wakeAt, changed, errors.Join(errs...)
}

// lastHeard is when the node's agent was last heard from. A node this
// process has not heard from yet (just registered before a restart) gets
// one heartbeat timeout of grace from when this process first saw it.
func (c *Clusters) lastHeard(n store.Node, now time.Time) time.Time {
	c.mu.Lock()
	first, ok := c.firstSeen[n.ID]
	if !ok {
		first = now
		c.firstSeen[n.ID] = now
	}
	c.mu.Unlock()
	last := first
	if t, ok := c.Hub.LastSeen(n.ID); ok && t.After(last) {
		last = t
	}
	if n.Ready.After(last) {
		last = n.Ready
	}
	return last
}

// ReleaseCompute ends a compute's jobs and removes its nodes, for the
// delete operation; it returns how many nodes are left.
func (c *Clusters) ReleaseCompute(ctx context.Context, computeID string) (int, error) {
	now := c.Clock.Now().UTC()
	jobs, err := store.JobsByStatus(ctx, c.DB.Q(), computeID, api.JobNotStarted, api.JobQueued, api.JobPreparing,
		api.JobStarting, api.JobRunning, api.JobFinalizing, api.JobCancelRequested)
	if err != nil {
		return 0, err
	}
	for _, j := range jobs {
		err := c.DB.Tx(ctx, func(q store.Querier) error {
			cur, err := store.GetJobByUID(ctx, q, j.UID)
			if err != nil {
				return err
			}
			return lifecycle.Abandon(ctx, q, &cur, "the compute was deleted", now)
		})
		if err != nil {
			return 0, err
		}
	}
	nodes, err := store.NodesOf(ctx, c.DB.Q(), computeID)
	if err != nil {
		return 0, err
	}
	var errs []error
	left := 0
	for _, n := range nodes {
		n.State, n.Reason, n.Changed = api.NodeLeaving, "the compute is being deleted", now
		if err := c.DB.Tx(ctx, func(q store.Querier) error { return store.PutNode(ctx, q, n) }); err != nil { // with its event
			return 0, err
		}
		if err := c.deleteNode(ctx, n); err != nil {
			errs = append(errs, err)
			left++
		}
	}
	return left, errors.Join(errs...)
}

// Reconcile compares the store with what the provider reports, after a
// control-plane start: machines without a record are deleted; records
// whose machine is gone become unusable (their jobs are requeued) and are
// replaced by the autoscaler if demand remains.
func (c *Clusters) Reconcile(ctx context.Context) error {
	insts, err := c.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("list provider nodes: %w", err)
	}
	nodes, err := store.AllNodes(ctx, c.DB.Q())
	if err != nil {
		return err
	}
	c.checkGPUAllocations(ctx, nodes)
	known := map[string]store.Node{}
	for _, n := range nodes {
		known[n.ID] = n
	}
	alive := map[string]bool{} // running, or on its way (a pod waiting for a machine)
	var errs []error
	for _, in := range insts {
		if _, ok := known[in.NodeID]; !ok {
			c.Log.Warn("deleting orphan node found at the provider", "node", in.NodeID, "provider_id", in.ProviderID)
			if err := c.Provider.Delete(ctx, in.NodeID); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		alive[in.NodeID] = in.Running || in.Starting
	}
	now := c.Clock.Now().UTC()
	for _, n := range nodes {
		if n.Provider != c.Provider.Name() || alive[n.ID] {
			continue
		}
		switch n.State {
		case api.NodeUnusable, api.NodePreempted:
			continue
		}
		reason := "the node's machine was gone when the control plane started"
		err := c.DB.Tx(ctx, func(q store.Querier) error {
			return lifecycle.NodeLost(ctx, q, n, api.NodeUnusable, reason, c.MaxAttempts, now)
		})
		if err != nil {
			errs = append(errs, err)
		}
		c.Log.Warn("node unusable", "node", n.ID, "reason", reason)
	}
	return errors.Join(errs...)
}
