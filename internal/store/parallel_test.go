package store

import (
	"context"
	"testing"
	"time"
)

// A parallel step's mini-batches: planned once, leased lowest first,
// counted by state with their items and retries, their rows read back in
// order, and removed with their job.
func TestParallelBatches(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	if err := InsertJob(ctx, db.W(), queuedJob("u1", "j1", 1, 0, "", "")); err != nil {
		t.Fatal(err)
	}
	if err := PlanBatches(ctx, db.W(), "u1", []int{2, 2, 1}); err != nil {
		t.Fatal(err)
	}
	if err := PlanBatches(ctx, db.W(), "u1", []int{9}); err != nil { // a second plan writes nothing
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	got, err := LeaseBatches(ctx, db.W(), "u1", "n1", 1, 2, t0.Add(time.Minute))
	if err != nil || len(got) != 2 || got[0].Idx != 0 || got[1].Idx != 1 || got[0].Tries != 1 || got[0].Node != "n1" {
		t.Fatalf("lease: %+v %v", got, err)
	}
	b := got[0]
	b.State, b.Rows, b.Ended = BatchDone, "r1\nr2\n", t0
	if err := PutBatch(ctx, db.W(), b); err != nil {
		t.Fatal(err)
	}
	b = got[1]
	b.State, b.FailedItems, b.Error, b.ItemNames, b.Retries = BatchFailed, 2, "boom", []string{"x", "y"}, 1
	if err := PutBatch(ctx, db.W(), b); err != nil {
		t.Fatal(err)
	}
	c, err := BatchCounts(ctx, db.Q(), "u1")
	if err != nil || c.Total != 3 || c.Done != 1 || c.Failed != 1 || c.Pending != 1 || c.Items != 5 || c.FailedItems != 2 || c.Retried != 1 {
		t.Fatalf("counts %+v %v", c, err)
	}
	late, err := LeaseBatches(ctx, db.W(), "u1", "n2", 1, 5, t0.Add(-time.Second))
	if err != nil || len(late) != 1 || late[0].Idx != 2 {
		t.Fatalf("the rest: %+v %v", late, err)
	}
	exp, err := ExpiredBatches(ctx, db.Q(), "u1", t0)
	if err != nil || len(exp) != 1 || exp[0].Idx != 2 {
		t.Fatalf("expired: %+v %v", exp, err)
	}
	held, err := NodeBatches(ctx, db.Q(), "u1", "n2")
	if err != nil || len(held) != 1 {
		t.Fatalf("held: %+v %v", held, err)
	}
	failed, err := FailedBatches(ctx, db.Q(), "u1", 10)
	if err != nil || len(failed) != 1 || failed[0].Error != "boom" || len(failed[0].ItemNames) != 2 {
		t.Fatalf("failed: %+v %v", failed, err)
	}
	var rows string
	if err := BatchRows(ctx, db.Q(), "u1", func(r string) error { rows += r; return nil }); err != nil || rows != "r1\nr2\n" {
		t.Fatalf("rows %q %v", rows, err)
	}
	if err := DeleteJob(ctx, db.W(), "u1"); err != nil {
		t.Fatal(err)
	}
	if c, _ := BatchCounts(ctx, db.Q(), "u1"); c.Total != 0 {
		t.Fatalf("mini-batches outlive their job: %+v", c)
	}
}
