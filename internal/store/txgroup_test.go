package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// queueWhileBusy holds the writer with one transaction until n more
// callers wait behind it, so that they are written as one batch; run is
// each caller's work. It returns each caller's error and what it
// panicked with.
func queueWhileBusy(t *testing.T, db *DB, n int, run func(i int, q Querier) error) ([]error, []any) {
	return queueWhileBusyCtx(t, db, n, func(int) context.Context { return context.Background() }, func() {}, run)
}

// queueWhileBusyCtx is queueWhileBusy with each caller's context, and
// queued run once they all wait.
func queueWhileBusyCtx(t *testing.T, db *DB, n int, ctxOf func(i int) context.Context, queued func(), run func(i int, q Querier) error) ([]error, []any) {
	t.Helper()
	ctx := context.Background()
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.Tx(ctx, func(Querier) error { close(held); <-hold; return nil })
	}()
	<-held
	errs, panics := make([]error, n), make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panics[i] = recover() }()
			errs[i] = db.Tx(ctxOf(i), func(q Querier) error { return run(i, q) })
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		queued := db.group.Queued()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers queued", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
	queued()
	close(hold)
	wg.Wait()
	return errs, panics
}

// Callers written in one transaction keep their work their own: a caller
// whose function fails (after writing) or panics leaves nothing behind
// and gets its own error or panic; every other caller's work is committed.
func TestGroupedTransactionsKeepEachCallersOutcome(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	ctx := context.Background()
	errBad := errors.New("refused")
	errs, panics := queueWhileBusy(t, db, 40, func(i int, q Querier) error {
		if err := InsertJob(ctx, q, queuedJob(fmt.Sprintf("u%02d", i), fmt.Sprintf("job-%02d", i), 1, 0, "", "")); err != nil {
			return err
		}
		switch i % 10 {
		case 3:
			return errBad
		case 7:
			panic("job " + fmt.Sprint(i))
		}
		return nil
	})
	for i := range 40 {
		_, err := GetJobByUID(ctx, db.Q(), fmt.Sprintf("u%02d", i))
		switch i % 10 {
		case 3:
			if !errors.Is(errs[i], errBad) || !errors.Is(err, ErrNotFound) {
				t.Errorf("caller %d failed: got %v, its job read back: %v", i, errs[i], err)
			}
		case 7:
			if panics[i] != "job "+fmt.Sprint(i) || !errors.Is(err, ErrNotFound) {
				t.Errorf("caller %d panicked: got panic %v, its job read back: %v", i, panics[i], err)
			}
		default:
			if errs[i] != nil || panics[i] != nil || err != nil {
				t.Errorf("caller %d succeeded: got %v / %v, its job read back: %v", i, errs[i], panics[i], err)
			}
		}
	}
}

// A caller that gave up (its context ended) while it waited for the writer
// gets its context's error and writes nothing; the others' work is kept.
func TestGroupedTransactionOfAGoneCaller(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	gone, cancel := context.WithCancel(context.Background())
	errs, _ := queueWhileBusyCtx(t, db, 4, func(i int) context.Context {
		if i == 2 {
			return gone
		}
		return context.Background()
	}, cancel, func(i int, q Querier) error {
		return InsertJob(context.Background(), q, queuedJob(fmt.Sprintf("u%d", i), fmt.Sprintf("job-%d", i), 1, 0, "", ""))
	})
	for i, err := range errs {
		if (i == 2) != errors.Is(err, context.Canceled) {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n, err := CountJobs(context.Background(), db.Q(), "/c", "Queued"); err != nil || n != 3 {
		t.Fatalf("%d jobs stored (%v), want 3", n, err)
	}
}

// A call whose statement fails because its caller's context ended fails
// alone; the calls queued with it are written.
func TestGroupedTransactionWithAnInterruptedStatement(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	errs, _ := queueWhileBusy(t, db, 4, func(i int, q Querier) error {
		ctx := context.Background()
		if i == 2 {
			ctx = gone
		}
		return InsertJob(ctx, q, queuedJob(fmt.Sprintf("u%d", i), fmt.Sprintf("job-%d", i), 1, 0, "", ""))
	})
	for i, err := range errs {
		if (i == 2) != errors.Is(err, context.Canceled) {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n, err := CountJobs(context.Background(), db.Q(), "/c", "Queued"); err != nil || n != 3 {
		t.Fatalf("%d jobs stored (%v), want 3", n, err)
	}
}

// Callers queued together without failures are all written.
func TestGroupedTransactionsAllWritten(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	errs, _ := queueWhileBusy(t, db, 100, func(i int, q Querier) error {
		return InsertJob(context.Background(), q, queuedJob(fmt.Sprintf("u%03d", i), fmt.Sprintf("job-%03d", i), 1, 0, "", ""))
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n, err := CountJobs(context.Background(), db.Q(), "/c", "Queued"); err != nil || n != 100 {
		t.Fatalf("%d jobs stored (%v), want 100", n, err)
	}
}
