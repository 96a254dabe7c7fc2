package controller

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A finished operation stays readable for Retain and is pruned by the
// first pass a resync after that; passes woken in between (a wake per
// request) leave the table alone.
func TestOperationsPruneFinishedOnesOnceAResync(t *testing.T) {
	h := newHarness(t)
	o := &Operations{DB: h.db, Clock: h.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Resync: 2 * time.Second, Retain: time.Hour}
	o.Init()
	if err := o.RunOnce(h.ctx); err != nil { // the first pass prunes (nothing yet)
		t.Fatal(err)
	}
	started := h.clk.Now()
	if err := store.InsertOperation(h.ctx, h.db.W(), store.Operation{ID: "op-1", Kind: store.OpJobCancel, Target: "job:x", Status: api.OpInProgress, Started: started}); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishOperation(h.ctx, h.db.W(), "op-1", api.OpSucceeded, "", started); err != nil {
		t.Fatal(err)
	}
	readable := func() bool {
		t.Helper()
		_, err := store.GetOperation(h.ctx, h.db.Q(), "op-1")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	h.clk.Step(time.Hour + time.Second) // past retention
	if err := o.RunOnce(h.ctx); err != nil {
		t.Fatal(err)
	}
	if readable() {
		t.Fatal("an operation finished longer ago than Retain is still readable after a resync")
	}

	// Another, finished past retention just after a prune: passes within
	// the resync leave it; the first one after it prunes it.
	if err := store.InsertOperation(h.ctx, h.db.W(), store.Operation{ID: "op-1", Kind: store.OpJobCancel, Target: "job:y", Status: api.OpInProgress, Started: started}); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishOperation(h.ctx, h.db.W(), "op-1", api.OpSucceeded, "", started); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.clk.Step(500 * time.Millisecond)
		if err := o.RunOnce(h.ctx); err != nil {
			t.Fatal(err)
		}
		if !readable() {
			t.Fatal("a pass within a resync of the last prune pruned again")
		}
	}
	h.clk.Step(500 * time.Millisecond)
	if err := o.RunOnce(h.ctx); err != nil {
		t.Fatal(err)
	}
	if readable() {
		t.Fatal("the first pass a resync after the last prune did not prune")
	}
}

// A change of jobs or nodes wakes the operations' loop only while it has
// operations in progress: with none, an agent's report costs no pass.
func TestOperationsWakeOnAChangeOnlyWithOperationsInProgress(t *testing.T) {
	h := newHarness(t)
	o := &Operations{DB: h.db, Clock: h.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o.Init()
	woken := func() bool {
		select {
		case <-o.wake:
			return true
		default:
			return false
		}
	}
	o.NotifyIfPending()
	if !woken() {
		t.Fatal("a change before the first pass did not wake the loop")
	}
	if err := o.RunOnce(h.ctx); err != nil {
		t.Fatal(err)
	}
	o.NotifyIfPending()
	if woken() {
		t.Fatal("a change woke the loop with no operation in progress")
	}

	// A cancel waits for its job to end: the change that ends it wakes.
	uid := h.submit(h.compute("cpu", 0, 1, "PT1M"), 1)
	if err := store.InsertOperation(h.ctx, h.db.W(), store.Operation{ID: "op-1", Kind: store.OpJobCancel, Target: "job:" + uid, Status: api.OpInProgress, Started: h.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	o.Notify() // as the API does when it starts one
	if !woken() {
		t.Fatal("starting an operation did not wake the loop")
	}
	if err := o.RunOnce(h.ctx); err != nil {
		t.Fatal(err)
	}
	if op, err := store.GetOperation(h.ctx, h.db.Q(), "op-1"); err != nil || op.Status != api.OpInProgress {
		t.Fatalf("the cancel of a queued job: %+v, %v; want it in progress", op, err)
	}
	o.NotifyIfPending()
	if !woken() {
		t.Fatal("a change did not wake the loop while an operation was in progress")
	}
}
