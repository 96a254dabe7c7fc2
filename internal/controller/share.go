package controller

import (
	"context"
	"errors"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Preempt stops the running jobs the plan names (lifecycle.Reclaim), each
// in its own transaction with its event, and wakes their nodes' polls so
// their agents stop them now.
func (a *passActuator) Preempt(ctx context.Context, ps []api.Preemption) error {
	comp := a.st.doc.Value
	var errs []error
	for _, p := range ps {
		words := p.Words(&comp)
		var j store.Job
		err := a.c.DB.Tx(ctx, func(q store.Querier) (err error) {
			if j, err = lifecycle.Reclaim(ctx, q, p.Job, words, a.now); err != nil {
				return err
			}
			e := store.Event{Compute: comp.ID, Type: api.EventJobPreempted, Time: a.now}
			e.Message, e.Reason, e.Attempt, e.Nodes = j.Doc.Name+": "+words, p.Kind, j.Attempt, j.Nodes
			return store.AddEvent(ctx, q, e)
		})
		if errors.Is(err, lifecycle.ErrStale) || errors.Is(err, store.ErrNotFound) {
			continue // it ended or changed since the decision: the next pass decides again
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.c.Metrics.JobPreempted(comp.ID, p.Kind)
		a.c.Log.Info("job preempted", "compute", comp.Name, "job", j.Doc.Name, "reason", p.Kind, "for", p.ForName)
		a.c.Hub.WakeAll(j.Nodes)
	}
	return errors.Join(errs...)
}
