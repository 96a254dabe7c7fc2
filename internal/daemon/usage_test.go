package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The leader forgets samples older than the retention at once and then
// every few minutes, as the clock moves.
func TestUsagePruning(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var rows []store.UsageRow
	for _, age := range []time.Duration{25 * time.Hour, 23 * time.Hour, time.Hour} {
		rows = append(rows, store.UsageRow{Compute: "c", Node: "n1", Time: t0.Add(-age), Body: "{}"})
	}
	if err := db.Tx(ctx, func(q store.Querier) error { return store.PutUsage(ctx, q, rows) }); err != nil {
		t.Fatal(err)
	}
	left := func() int {
		got, err := store.UsageSamples(ctx, db.Q(), store.UsageQuery{Compute: "c"})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	clk := clock.NewFake(t0)
	wait := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := clk.BlockUntil(wctx, 1); err != nil {
			t.Fatal("the pruning loop does not wait for its next round")
		}
	}
	stop := startUsagePruning(ctx, db, Options{UsageRetention: 24 * time.Hour, Clock: clk, Log: slog.New(slog.DiscardHandler)})
	defer stop()
	wait()
	if n := left(); n != 2 {
		t.Fatalf("%d samples after the first round, want 2 (the one 25 h old gone)", n)
	}
	if every := usagePruneEvery(24 * time.Hour); every != 10*time.Minute {
		t.Errorf("pruned every %v, want 10m", every)
	}
	clk.Step(2 * time.Hour)
	wait()
	if n := left(); n != 1 {
		t.Errorf("%d samples two hours later, want 1 (the one now 25 h old gone)", n)
	}
}
