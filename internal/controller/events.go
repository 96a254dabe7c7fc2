package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// DefaultEventRetention is how long compute and node events are kept.
const DefaultEventRetention = 30 * 24 * time.Hour

// eventPruneBatch bounds how many events one transaction removes, so
// pruning never holds the writer long.
const eventPruneBatch = 5000

// EventRetention removes compute and node events older than Keep, at
// start and then every hour.
type EventRetention struct {
	DB    *store.DB
	Clock clock.Clock
	Keep  time.Duration // 0: DefaultEventRetention
	Log   *slog.Logger
}

// Run prunes until ctx ends.
func (r *EventRetention) Run(ctx context.Context) {
	for {
		if n, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("prune events", "err", err)
		} else if n > 0 {
			r.Log.Info("events pruned", "events", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.Clock.After(time.Hour):
		}
	}
}

// Prune removes the events older than the retention, batch by batch, and
// says how many went.
func (r *EventRetention) Prune(ctx context.Context) (int64, error) {
	keep := r.Keep
	if keep <= 0 {
		keep = DefaultEventRetention
	}
	cutoff := r.Clock.Now().Add(-keep)
	var total int64
	for {
		var n int64
		err := r.DB.Tx(ctx, func(q store.Querier) error {
			var err error
			n, err = store.DeleteEventsBefore(ctx, q, cutoff, eventPruneBatch)
			return err
		})
		total += n
		if err != nil || n < eventPruneBatch {
			return total, err
		}
	}
}
