package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/cumulus-ml/cumulus/internal/store"
)

// DefaultUsageRetention is how long utilization samples are kept.
const DefaultUsageRetention = 24 * time.Hour

// validateUsage checks the utilization settings (zero: the defaults).
func (o Options) validateUsage() error {
	if o.UsageInterval != 0 && o.UsageInterval < 100*time.Millisecond {
		return errors.New("--usage-interval must be at least 100ms")
	}
	if o.UsageRetention < 0 {
		return errors.New("--usage-retention may not be negative")
	}
	if o.UsageRetention != 0 && o.UsageInterval != 0 && o.UsageRetention < o.UsageInterval {
		return errors.New("--usage-retention must be at least --usage-interval: samples would be gone before the next came")
	}
	return nil
}

// usagePruneEvery is how often the leader forgets samples past the
// retention: a 25th of it, between a minute and ten.
func usagePruneEvery(retention time.Duration) time.Duration {
	return min(max(retention/25, time.Minute), 10*time.Minute)
}

// startUsagePruning forgets utilization samples older than the retention,
// at once and then periodically, on the leader's store until ctx ends or
// the returned stop is called.
func startUsagePruning(ctx context.Context, db *store.DB, o Options) (stop func()) {
	retention := o.UsageRetention
	if retention <= 0 {
		retention = DefaultUsageRetention
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	log := o.Log.With("component", "usage")
	go func() {
		defer close(done)
		for {
			n, err := store.DeleteUsageBefore(ctx, db.W(), o.Clock.Now().Add(-retention))
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("forget old utilization samples", "err", err)
			case n > 0:
				log.Debug("forgot old utilization samples", "samples", n, "retention", retention)
			}
			select {
			case <-ctx.Done():
				return
			case <-o.Clock.After(usagePruneEvery(retention)):
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
