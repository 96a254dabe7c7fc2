// Package controller holds the loops that act: they read the store, call
// the pure decisions, apply them through providers and record the outcome.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// NodeReleaser removes a compute's nodes (jobs stopped, machines deleted)
// and says how many are still there. It must be idempotent.
type NodeReleaser interface {
	ReleaseCompute(ctx context.Context, computeID string) (remaining int, err error)
}

// Operations runs long-running operations to completion. Operations live
// in the store, so after a crash the next start picks them up again.
type Operations struct {
	DB       *store.DB
	Clock    clock.Clock
	Log      *slog.Logger
	Nodes    NodeReleaser // nil: computes have no nodes to release
	Resync   time.Duration
	Retain   time.Duration // how long finished operations stay readable
	OnChange func()        // called after an operation changed a compute

	wake     chan struct{}
	prunedAt time.Time   // when finished operations were last pruned
	pending  atomic.Bool // the last pass found operations in progress
}

// Notify wakes the loop (non-blocking): an operation may have started.
func (o *Operations) Notify() {
	select {
	case o.wakeChan() <- struct{}{}:
	default:
	}
}

// NotifyIfPending wakes the loop after a change an operation in progress
// may wait on (a job ended, a node went), but only if the last pass left
// one in progress: with none, a pass per agent report would find nothing
// to do. An operation started since was told with Notify.
func (o *Operations) NotifyIfPending() {
	if o.pending.Load() {
		o.Notify()
	}
}

func (o *Operations) wakeChan() chan struct{} {
	if o.wake == nil {
		o.wake = make(chan struct{}, 1)
	}
	return o.wake
}

// Init must be called before Run and Notify are used concurrently.
func (o *Operations) Init() {
	o.wakeChan()
	o.pending.Store(true) // until a pass has looked
	if o.Resync <= 0 {
		o.Resync = 2 * time.Second
	}
	if o.Retain <= 0 {
		o.Retain = 24 * time.Hour
	}
}

// Run loops until ctx ends.
func (o *Operations) Run(ctx context.Context) {
	o.Init()
	for {
		if err := o.RunOnce(ctx); err != nil && ctx.Err() == nil {
			o.Log.Error("operations pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-o.Clock.After(o.Resync):
		}
	}
}

// RunOnce advances every pending operation as far as it can go now.
func (o *Operations) RunOnce(ctx context.Context) error {
	ops, err := store.PendingOperations(ctx, o.DB.Q())
	if err != nil {
		o.pending.Store(true)
		return err
	}
	// Set before advancing them: a change while they advance wakes the
	// next pass.
	o.pending.Store(len(ops) > 0)
	var errs []error
	for _, op := range ops {
		if op.Kind == store.OpComputeDelete || op.Kind == store.OpWorkspaceDelete {
			// A finished compute delete may let a workspace delete finish:
			// look again at once rather than at the next resync.
			defer o.Notify()
		}
		if err := o.advance(ctx, op); err != nil {
			errs = append(errs, fmt.Errorf("operation %s (%s %s): %w", op.ID, op.Kind, op.Target, err))
		}
	}
	// Pruning is a write: done at most once a resync, not at every wake.
	if now := o.Clock.Now(); o.prunedAt.IsZero() || now.Sub(o.prunedAt) >= o.Resync {
		if err := store.PruneOperations(ctx, o.DB.W(), now.Add(-o.Retain)); err != nil {
			errs = append(errs, err)
		} else {
			o.prunedAt = now
		}
	}
	return errors.Join(errs...)
}

func (o *Operations) advance(ctx context.Context, op store.Operation) error {
	switch op.Kind {
	case store.OpComputeCreate:
		return o.finishCreate(ctx, op)
	case store.OpComputeDelete:
		return o.runDelete(ctx, op)
	case store.OpWorkspaceDelete:
		return o.runWorkspaceDelete(ctx, op)
	case store.OpJobCancel:
		return o.checkCancel(ctx, op)
	}
	return o.fail(ctx, op, api.BadRequest(api.CodeInternal, "unknown operation kind %q", op.Kind))
}

// computeOf reads the compute an operation targets.
func (o *Operations) computeOf(ctx context.Context, q store.Querier, target string) (store.Doc[api.Compute], api.Scope, string, error) {
	sc, name, err := api.ParseComputeID(target, api.Scope{})
	if err != nil {
		return store.Doc[api.Compute]{}, sc, "", err
	}
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, sc.WorkspaceID(), name)
	return d, sc, name, err
}

func (o *Operations) finishCreate(ctx context.Context, op store.Operation) error {
	now := o.Clock.Now().UTC()
	err := o.DB.Tx(ctx, func(q store.Querier) error {
		d, sc, name, err := o.computeOf(ctx, q, op.Target)
		if errors.Is(err, store.ErrNotFound) {
			return store.FinishOperation(ctx, q, op.ID, api.OpCanceled, errorsJSON(api.Conflict(api.CodeConflict, "the compute was deleted before it finished creating")), now)
		}
		if err != nil {
			return err
		}
		c := d.Value
		if c.Properties.ProvisioningState == api.StateDeleting {
			return store.FinishOperation(ctx, q, op.ID, api.OpCanceled, errorsJSON(api.Conflict(api.CodeConflict, "the compute is being deleted")), now)
		}
		c.Properties.ProvisioningState = api.StateSucceeded
		if _, err := store.Put(ctx, q, store.KindCompute, sc.WorkspaceID(), name, c, d.Version, now); err != nil {
			return err
		}
		return store.FinishOperation(ctx, q, op.ID, api.OpSucceeded, "", now)
	})
	if err == nil {
		o.changed()
		o.Log.Info("compute created", "compute", op.Target, "operation", op.ID)
	}
	return err
}

func (o *Operations) runDelete(ctx context.Context, op store.Operation) error {
	if o.Nodes != nil {
		remaining, err := o.Nodes.ReleaseCompute(ctx, op.Target)
		if err != nil {
			return err
		}
		if remaining > 0 {
			return nil // come back on the next pass
		}
	}
	now := o.Clock.Now().UTC()
	err := o.DB.Tx(ctx, func(q store.Querier) error {
		_, sc, name, err := o.computeOf(ctx, q, op.Target)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil {
			if err := store.Delete(ctx, q, store.KindCompute, sc.WorkspaceID(), name, 0); err != nil {
				return err
			}
		}
		if err := store.DeleteShareUsage(ctx, q, op.Target); err != nil {
			return err
		}
		if err := store.DeleteSecret(ctx, q, op.Target); err != nil {
			return err
		}
		return store.FinishOperation(ctx, q, op.ID, api.OpSucceeded, "", now)
	})
	if err == nil {
		o.changed()
		o.Log.Info("compute deleted", "compute", op.Target, "operation", op.ID)
	}
	return err
}

func (o *Operations) fail(ctx context.Context, op store.Operation, e *api.Error) error {
	return store.FinishOperation(ctx, o.DB.W(), op.ID, api.OpFailed, errorsJSON(e), o.Clock.Now().UTC())
}

func (o *Operations) changed() {
	if o.OnChange != nil {
		o.OnChange()
	}
}

// runWorkspaceDelete removes a workspace once its computes are gone (their
// own delete operations remove them).
func (o *Operations) runWorkspaceDelete(ctx context.Context, op store.Operation) error {
	now := o.Clock.Now().UTC()
	return o.DB.Tx(ctx, func(q store.Querier) error {
		sc, err := parseWorkspaceID(op.Target)
		if err != nil {
			return err
		}
		n, err := store.Count(ctx, q, store.KindCompute, sc.WorkspaceID())
		if err != nil || n > 0 {
			return err
		}
		if err := store.Delete(ctx, q, store.KindWorkspace, sc.GroupID(), sc.Workspace, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := store.DeleteWorkspaceBlobs(ctx, q, sc.WorkspaceID()); err != nil {
			return err
		}
		o.Log.Info("workspace deleted", "workspace", op.Target, "operation", op.ID)
		return store.FinishOperation(ctx, q, op.ID, api.OpSucceeded, "", now)
	})
}

// parseWorkspaceID splits a workspace's ARM id.
func parseWorkspaceID(id string) (api.Scope, error) {
	sc, _, err := api.ParseComputeID(id+"/computes/x", api.Scope{})
	return sc, err
}

// checkCancel finishes a cancel operation once its job has ended.
func (o *Operations) checkCancel(ctx context.Context, op store.Operation) error {
	j, err := store.GetJobByUID(ctx, o.DB.Q(), strings.TrimPrefix(op.Target, "job:"))
	now := o.Clock.Now().UTC()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.FinishOperation(ctx, o.DB.W(), op.ID, api.OpSucceeded, "", now)
	case err != nil:
		return err
	case j.Doc.Properties.Status == api.JobCanceled:
		return store.FinishOperation(ctx, o.DB.W(), op.ID, api.OpSucceeded, "", now)
	case api.JobTerminal(j.Doc.Properties.Status):
		return store.FinishOperation(ctx, o.DB.W(), op.ID, api.OpFailed,
			errorsJSON(api.Conflict(api.CodeConflict, "job %s had already ended %s", j.Doc.Name, j.Doc.Properties.Status)), now)
	}
	return nil
}
