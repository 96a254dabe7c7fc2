package controller

import (
	"context"
	"errors"
	"time"

	"github.com/cumulus-ml/cumulus/internal/actuate"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// passActuator carries out one compute's plan in a pass (see
// actuate.Apply): intent is written to the store before the provider is
// called, and the location's quota usage follows the nodes that come and
// go, for the clusters after this one in the pass.
type passActuator struct {
	c      *Clusters
	st     clusterState
	queued []store.QueuedJob // the head of the queue the decision saw
	qv     quotaView
	u      *quota.Usage
	now    time.Time
	pool   *gpu.Pool // the machine's devices (nil: the nodes share none)

	// quotaBound, set by Record: quota kept the cluster from its target.
	quotaBound bool
}

var _ actuate.Actuator = (*passActuator)(nil)

func (a *passActuator) Assign(ctx context.Context, as []decide.Assignment) error {
	err := a.c.assignAll(ctx, as, a.now)
	a.c.noteAssigned(a.st.doc.Value, as)
	return err
}

func (a *passActuator) Drain(ctx context.Context, id string) error {
	return a.c.drain(ctx, id)
}

func (a *passActuator) Remove(ctx context.Context, id string) (bool, error) {
	gone, err := a.c.remove(ctx, id, a.st.nodes)
	if gone == nil {
		return false, err
	}
	if a.pool != nil {
		a.pool.Release(gone.ID) // at once, for the nodes this pass creates
	}
	a.u.Add(gone.VMSize, gone.Priority == api.PriorityLowPriority, -1)
	a.c.Metrics.ScaledDown(a.st.doc.Value.ID)
	return true, err
}

func (a *passActuator) Create(ctx context.Context, count int, images []string) (int, error) {
	comp := a.st.doc.Value
	made, err := a.c.create(ctx, comp, count, images, a.pool, a.now)
	size, _ := catalog.Lookup(comp.Aml().VMSize)
	a.u.Add(size.Name, comp.Aml().VMPriority == api.PriorityLowPriority, made)
	a.c.Metrics.ScaledUp(comp.ID, made)
	return made, err
}

// Record writes what the plan leaves the compute at: the quota messages
// of the jobs that wait for quota, and the compute's status. When the
// provider refused a node this pass, the jobs wait for its backoff from
// now on and say so at once: the plan, made before, could not.
func (a *passActuator) Record(ctx context.Context, p decide.Plan, done actuate.Applied) error {
	if done.CreateErr != nil && !p.Blocked.Has(api.BlockBackoff) {
		if b, ok := a.c.backoffOf(a.st.doc.Value.ID); ok {
			p.Blocked = append(p.Blocked[:len(p.Blocked):len(p.Blocked)], api.Block{Kind: api.BlockBackoff, Message: b.msg})
		}
	}
	short := a.qv.shortfall(a.st.doc.Value, p, *a.u)
	a.quotaBound = short != nil
	return errors.Join(
		a.c.recordQuotaWaits(ctx, a.queued, p, short),
		a.c.recordStatus(ctx, a.st, p, short, a.now),
	)
}
