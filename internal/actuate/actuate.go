// Package actuate carries out decide's plans and feeds its adaptive idle
// policy: the code that the cluster controller (internal/controller) and
// the trace simulator (internal/sim) share, so that what the simulator
// measures is what the server does.
//
// Each of them implements Actuator: the controller writes the store and
// calls the provider, the simulator changes its clusters in memory. Apply
// turns a decide.Plan into Actuator calls, and Demand turns what a
// cluster's jobs and nodes did into the decide.IdleHistory that the
// adaptive idle policy reads. Like decide, the package does no I/O of its
// own and reads no clock: times come in as data.
package actuate

import (
	"context"
	"errors"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
)

// Actuator carries out the steps of one cluster's plan.
type Actuator interface {
	// Assign starts each job on the nodes named, in plan order. An
	// assignment that the world has overtaken since the snapshot (the job
	// canceled, a node gone) may be skipped: the next decision sees it.
	Assign(ctx context.Context, as []decide.Assignment) error
	// Preempt stops each running job named, for the reason given, and
	// queues it again; its nodes are idle once it has stopped. A job that
	// no longer runs the attempt the plan saw is skipped.
	Preempt(ctx context.Context, ps []api.Preemption) error
	// Drain marks a busy node leaving: it is removed once its job ends.
	Drain(ctx context.Context, nodeID string) error
	// Remove takes a node out of the cluster and deletes its machine. It
	// reports whether the node left; false when it was kept (it changed
	// since the snapshot) or was gone already.
	Remove(ctx context.Context, nodeID string) (bool, error)
	// Create requests count new nodes, the i-th of the image images[i]
	// when there is one (else the node image). It returns how many it
	// requested: it stops at the first failure.
	Create(ctx context.Context, count int, images []string) (int, error)
	// Record notes, once the steps are done, what the plan leaves the
	// cluster at: its status, what it waits for, when to look again.
	Record(ctx context.Context, p decide.Plan, done Applied) error
}

// Applied is what the steps of a plan did.
type Applied struct {
	Removed int // nodes that left the cluster
	Created int // nodes requested
	// CreateErr is why fewer than Plan.Create were requested. It is not
	// a failure of the plan: the actuator backs off, and a later plan
	// asks again.
	CreateErr error
}

// Apply carries out p through a, in the order that keeps the plan safe:
// assignments first (Decide counted the nodes they take as busy, so none
// of them is in Remove), then preemptions (their nodes stay, for the jobs
// they are stopped for), then drains, then removals, then creations (so
// that the quota usage they leave includes the cores removals freed), and
// last the record of where that leaves the cluster. A step that fails
// does not stop the others; the errors are returned together.
func Apply(ctx context.Context, a Actuator, p decide.Plan) (Applied, error) {
	var done Applied
	var errs []error
	if len(p.Assign) > 0 {
		if err := a.Assign(ctx, p.Assign); err != nil {
			errs = append(errs, err)
		}
	}
	if len(p.Preempt) > 0 {
		if err := a.Preempt(ctx, p.Preempt); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range p.Drain {
		if err := a.Drain(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range p.Remove {
		gone, err := a.Remove(ctx, id)
		if gone {
			done.Removed++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if p.Create > 0 {
		done.Created, done.CreateErr = a.Create(ctx, p.Create, p.CreateImages)
	}
	if err := a.Record(ctx, p, done); err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}
