package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// checkGangsDue runs checkGangs on a compute when its last check is a
// quarter of the heartbeat timeout old: it reads every running job of the
// compute (20 ms for 5,000, a fifth of such a cluster's pass), and passes
// come every few seconds (Resync) anyway.
func (c *Clusters) checkGangsDue(ctx context.Context, compute string, nodes []store.Node, now time.Time) (bool, error) {
	c.mu.Lock()
	last, seen := c.gangCheck[compute]
	c.mu.Unlock()
	if seen && now.Before(last.Add(c.HeartbeatTimeout/4)) {
		return false, nil
	}
	changed, err := c.checkGangs(ctx, compute, nodes, now)
	if err == nil {
		c.mu.Lock()
		c.gangCheck[compute] = now
		c.mu.Unlock()
	}
	return changed, err
}

// checkGangs holds every job that was given nodes to them: each node of
// its current attempt exists and holds the job (a node whose rank ended
// included; lifecycle frees the nodes only when the job ends). The
// transitions keep this true; a job that breaks it anyway — a node record
// removed, or freed, by a path that forgot its job — would wait forever for
// a rank that is gone, so the check that sees it (within a quarter of the
// heartbeat timeout, the bound on noticing a silent node) ends the attempt
// with the reason and queues the job again, or fails it once its attempts are
// used up. The nodes' records are counted first, so that only a job with
// too few holders is read. It reports whether it changed anything.
func (c *Clusters) checkGangs(ctx context.Context, compute string, nodes []store.Node, now time.Time) (bool, error) {
	active, err := store.ActiveJobs(ctx, c.DB.Q(), compute)
	if err != nil {
		return false, err
	}
	held := map[string]int{}
	for _, n := range nodes {
		if n.JobID != "" {
			held[n.JobID]++
		}
	}
	changed := false
	var errs []error
	for _, a := range active {
		if held[a.UID] >= a.Nodes {
			continue
		}
		var why, name string
		err := c.DB.Tx(ctx, func(q store.Querier) error {
			why = ""
			j, err := store.GetJobByUID(ctx, q, a.UID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if api.JobTerminal(j.Doc.Properties.Status) || j.Doc.Properties.Status == api.JobQueued {
				return nil // it moved on since the list was read
			}
			if why, err = lostRank(ctx, q, j); err != nil || why == "" {
				return err
			}
			name = j.Doc.Name
			return lifecycle.Requeue(ctx, q, j, why, c.MaxAttempts, now)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", a.UID, err))
			continue
		}
		if why != "" {
			changed = true
			c.Log.Warn("job lost a node; its attempt ends", "job", name, "compute", compute, "reason", why)
		}
	}
	return changed, errors.Join(errs...)
}

// lostRank says which node of the job's current attempt no longer holds
// it, and how; "" when every one does (or the job holds no nodes of its
// own: a sweep).
func lostRank(ctx context.Context, q store.Querier, j store.Job) (string, error) {
	for rank, id := range j.Nodes {
		if _, ended := j.Exits[id]; ended && j.Doc.IsParallel() {
			continue // a parallel step goes on without a rank that ended (or was lost): its nodes do not depend on each other
		}
		n, err := store.GetNode(ctx, q, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Sprintf("node rank %d (node %s) of the job's attempt no longer exists", rank, id), nil
		case err != nil:
			return "", err
		case n.JobID == "":
			return fmt.Sprintf("node rank %d (node %s) of the job's attempt was freed while the job ran (it is %s)", rank, id, n.State), nil
		case n.JobID != j.UID:
			return fmt.Sprintf("node rank %d (node %s) of the job's attempt runs another job", rank, id), nil
		}
	}
	return "", nil
}
