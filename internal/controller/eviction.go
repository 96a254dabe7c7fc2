package controller

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// evictionReportMargin is how long past the grace period a preempted
// node's agent has to report its job stopped before the controller
// assumes the node is gone with it.
const evictionReportMargin = 30 * time.Second

// checkEvictions handles preemptions of a low-priority cluster's nodes:
// random evictions at EvictionRate (chaos testing), and preempted nodes
// whose agent never reported (the job is requeued all the same). It says
// whether it wrote anything.
func (c *Clusters) checkEvictions(ctx context.Context, comp api.Compute, nodes []store.Node, now time.Time) (time.Time, bool, error) {
	if comp.Aml().VMPriority != api.PriorityLowPriority {
		return time.Time{}, false, nil
	}
	changed := false
	var wakeAt time.Time
	var errs []error
	grace := comp.PreemptionGrace()
	for _, n := range nodes {
		switch {
		case !n.Evicted.IsZero() && n.JobID != "":
			deadline := n.Evicted.Add(grace + evictionReportMargin)
			if now.Before(deadline) {
				wakeAt = earliest(wakeAt, deadline)
				continue
			}
			changed = true
			err := c.DB.Tx(ctx, func(q store.Querier) error {
				return lifecycle.Preempted(ctx, q, n.ID, c.MaxPreemptions, now)
			})
			if err != nil {
				errs = append(errs, err)
			}
			c.Log.Warn("preempted node did not report its job stopped; requeued it", "node", n.ID, "job", n.JobID)
		case n.Evicted.IsZero() && c.EvictionRate > 0 && (n.State == api.NodeIdle || n.State == api.NodeRunning):
			if c.evictNow(n.ID, now) {
				changed = true
				err := c.DB.Tx(ctx, func(q store.Querier) error {
					_, err := lifecycle.Evict(ctx, q, n.ID, now)
					return err
				})
				if err != nil && !errors.Is(err, lifecycle.ErrNotEvictable) {
					errs = append(errs, err)
					continue
				}
				c.Log.Info("random eviction", "node", n.ID, "job", n.JobID)
				c.Hub.Wake(n.ID)
			}
		}
	}
	if c.EvictionRate > 0 {
		wakeAt = earliest(wakeAt, now.Add(time.Second)) // keep rolling the dice
	}
	return wakeAt, changed, errors.Join(errs...)
}

// evictNow rolls the dice for one node: with rate λ evictions per
// node-hour, the chance over the time since its last roll is 1−e^(−λt).
func (c *Clusters) evictNow(node string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.lastRoll[node]
	c.lastRoll[node] = now
	if !ok {
		return false
	}
	hours := now.Sub(last).Hours()
	return c.Rand() < 1-math.Exp(-c.EvictionRate*hours)
}
