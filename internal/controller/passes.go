package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
)

// wakeup coalesces requests for a pass soon: at most one waits.
type wakeup struct {
	once sync.Once
	ch   chan struct{}
}

func (w *wakeup) c() chan struct{} {
	w.once.Do(func() { w.ch = make(chan struct{}, 1) })
	return w.ch
}

// notify asks for a pass soon; it never blocks.
func (w *wakeup) notify() {
	select {
	case w.c() <- struct{}{}:
	default:
	}
}

// runPasses calls pass every interval and, after a notify, once more
// after gap (so a burst of changes makes one pass), until ctx ends. A
// failed pass is logged as what and the next one comes as usual.
func runPasses(ctx context.Context, clk clock.Clock, interval, gap time.Duration, w *wakeup, log *slog.Logger, what string, pass func(context.Context) error) {
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(what, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(interval):
		case <-w.c():
			select {
			case <-ctx.Done():
				return
			case <-clk.After(gap):
			}
		}
	}
}
