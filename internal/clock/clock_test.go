package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
)

func TestBlockUntilWaitsForTheTimerThenStepFiresIt(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	fc := clock.NewFake(t0)
	fired := make(chan time.Time)
	go func() { fired <- <-fc.After(time.Minute) }()
	if err := fc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Minute)
	if got := <-fired; !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("fired at %v", got)
	}

	// Nothing waits now: BlockUntil gives up with the context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fc.BlockUntil(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntil with nothing waiting: %v", err)
	}
	if err := fc.BlockUntil(ctx, 0); err != nil {
		t.Fatalf("BlockUntil(0): %v", err)
	}
}
