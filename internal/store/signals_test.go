package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/pgtest"
)

// TestSignalsReachListeners: what one replica sends with Notify reaches
// another's Listen, on the right channel, payload intact; the listener
// returns when its context ends. A SQLite store, one process, refuses to
// send.
func TestSignalsReachListeners(t *testing.T) {
	ctx := context.Background()
	lite, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if err := lite.Notify(ctx, "cumulus_test", "x"); err == nil {
		t.Error("Notify on a SQLite store = nil; want an error")
	}

	dsn := pgtest.DSN(t)
	db, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lctx, stop := context.WithCancel(ctx)
	type sig struct{ channel, payload string }
	got := make(chan sig, 100)
	done := make(chan error, 1)
	go func() {
		done <- Listen(lctx, dsn, []string{"cumulus_a", "cumulus_b"}, func(ch, p string) { got <- sig{ch, p} })
	}()
	// A signal sent before the listener has subscribed is lost (as
	// between replicas): probe until one arrives, then send the real ones.
	deadline := time.After(30 * time.Second)
probe:
	for {
		if err := db.Notify(ctx, "cumulus_a", "probe"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			break probe
		case err := <-done:
			t.Fatalf("Listen returned %v before any signal", err)
		case <-deadline:
			t.Fatal("no probe signal heard within 30 s")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := db.Notify(ctx, "cumulus_b", "node-1,node-2"); err != nil {
		t.Fatal(err)
	}
	if err := db.Notify(ctx, "cumulus_other", "unheard"); err != nil {
		t.Fatal(err)
	}
	if err := db.Notify(ctx, "cumulus_a", "clusters"); err != nil {
		t.Fatal(err)
	}
	var heard []sig
	for len(heard) < 2 {
		select {
		case s := <-got:
			if s.payload != "probe" {
				heard = append(heard, s)
			}
		case <-deadline:
			t.Fatalf("heard %v; want the two signals sent on the listened channels", heard)
		}
	}
	if want := []sig{{"cumulus_b", "node-1,node-2"}, {"cumulus_a", "clusters"}}; heard[0] != want[0] || heard[1] != want[1] {
		t.Errorf("heard %v; want %v", heard, want)
	}
	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}
