package replica

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/store"
)

type term struct {
	holder string
	token  int64
	start  bool
}

// TestElection: a replica does not lead while another's lease runs; it
// takes over once the lease expires unrenewed (a dead leader) with the
// next token; a leader that shuts down gives the lease up, and the other
// takes over at its next try, not after the lease. The clock is fake.
func TestElection(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Unix(1_000_000, 0)
	clk := clock.NewFake(t0)
	const lease = 9 * time.Second
	// A leader that died without giving the lease up.
	if _, ok, err := db.AcquireLease(ctx, LeaseName, "ghost", t0, lease); err != nil || !ok {
		t.Fatal(ok, err)
	}
	terms := make(chan term, 16)
	start := func(holder string) (*Replica, context.CancelFunc, chan struct{}) {
		r := New(Options{DB: db, Hub: hub.New(), Clock: clk, Holder: holder, Lease: lease, HeartbeatTimeout: time.Minute,
			Lead: func(ctx context.Context, fdb *store.DB) {
				l, _ := store.GetLease(context.Background(), fdb.Q(), LeaseName)
				terms <- term{holder, l.Token, true}
				<-ctx.Done()
				terms <- term{holder, l.Token, false}
			}})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(rctx) }()
		return r, cancel, done
	}
	next := func(want term) {
		t.Helper()
		select {
		case got := <-terms:
			if got != want {
				t.Fatalf("term %+v, want %+v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no term event, want %+v", want)
		}
	}
	none := func() {
		t.Helper()
		select {
		case got := <-terms:
			t.Fatalf("unexpected term event %+v", got)
		default:
		}
	}
	wait := func(n int) {
		t.Helper()
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := clk.BlockUntil(bctx, n); err != nil {
			t.Fatalf("waiting for %d timers: %v", n, err)
		}
	}

	b, stopB, doneB := start("b")
	wait(2) // b's election and heartbeat loops wait
	for range 2 {
		clk.Step(lease / 3)
		wait(2)
		none()
		if b.Leader() {
			t.Fatal("b leads while the ghost's lease runs")
		}
	}
	clk.Step(lease / 3) // t0 + lease: the ghost's lease has run out
	next(term{"b", 2, true})
	if !b.Leader() {
		t.Error("b leads but says it does not")
	}

	_, stopA, doneA := start("a")
	wait(4)
	clk.Step(lease / 3) // b renews; a may not take it
	wait(4)
	none()

	stopB() // a clean shutdown gives the lease up
	next(term{"b", 2, false})
	<-doneB
	wait(2)
	clk.Step(lease / 3) // a's next try, well before b's lease would have expired
	next(term{"a", 3, true})
	stopA()
	next(term{"a", 3, false})
	<-doneA
	if l, err := store.GetLease(ctx, db.Q(), LeaseName); err != nil || l.Holder != "a" || l.Expires.After(clk.Now()) {
		t.Errorf("after a's shutdown the lease is %+v, %v; want a's, expired", l, err)
	}
}
