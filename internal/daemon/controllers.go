package daemon

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// controllers are what the leader runs, made afresh for each term.
type controllers struct {
	clusters  *controller.Clusters
	ops       *controller.Operations
	events    *controller.EventRetention
	budgets   *controller.Budgets
	sweeps    *controller.Sweeps
	pipelines *controller.Pipelines
}

// runControllers runs the controllers until ctx ends: reconciliation with
// the provider, then the cluster passes; long-running operations; the
// provider's events; the blob collector; the event history's retention;
// the budgets' judge; the sweeps; the pipelines.
func runControllers(ctx context.Context, c controllers, api *server.Server, log *slog.Logger) {
	clusters := c.clusters
	var wg sync.WaitGroup
	wg.Add(8)
	go func() {
		defer wg.Done()
		c.sweeps.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.pipelines.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.ops.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.events.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.budgets.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		// Reconcile with the provider first (it may wait on slow machine
		// deletions), while the API already serves agents re-attaching.
		if err := clusters.Reconcile(ctx); err != nil && ctx.Err() == nil {
			log.Error("reconcile nodes with the provider", "err", err)
		}
		clusters.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		if err := clusters.WatchProvider(ctx); err != nil && ctx.Err() == nil {
			log.Error("watch the provider's nodes", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		api.RunBlobGC(ctx) // removes uploads no job references after their grace period
	}()
	wg.Wait()
}

// relay is what the API wakes when jobs, nodes or operations change: the
// controllers of this process while it leads, and the other replicas'
// (through the store's signals) when there are several.
type relay struct {
	mu     sync.Mutex
	local  server.Notifier
	remote func()
}

func (r *relay) setLocal(n server.Notifier) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local = n
}

func (r *relay) setRemote(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remote = f
}

// Notify wakes the controllers wherever they run.
func (r *relay) Notify() {
	local, remote := r.targets()
	if local != nil {
		local.Notify()
	}
	if remote != nil {
		remote()
	}
}

// NotifyIfPending tells this process's controllers of a change only work
// in progress waits on (they may ignore it), and the other replicas as
// Notify does.
func (r *relay) NotifyIfPending() {
	local, remote := r.targets()
	server.NotifyIfPending(local)
	if remote != nil {
		remote()
	}
}

// notifyLocal wakes this process's controllers, if it runs them.
func (r *relay) notifyLocal() {
	if local, _ := r.targets(); local != nil {
		local.Notify()
	}
}

// targets are whom the relay tells now: this process's controllers (nil
// unless it runs them) and the other replicas (nil with none).
func (r *relay) targets() (local server.Notifier, remote func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local, r.remote
}

// fanOut tells several notifiers.
type fanOut []server.Notifier

func (f fanOut) Notify() {
	for _, n := range f {
		n.Notify()
	}
}
