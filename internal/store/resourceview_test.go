package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A compute read outside a transaction shows every committed write of it
// (created, changed, deleted and created again under the same name,
// whose version starts at 1 again), as SQL reads it, and nothing of a
// rolled-back write.
func TestResourceReadsFollowCommittedWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	put := func(q Querier, desc string, ifVersion int64) error {
		_, err := Put(ctx, q, KindCompute, "/WS", "GPU", api.Compute{Properties: api.ComputeProperties{Description: desc}}, ifVersion, at)
		return err
	}
	read := func(wantDesc string, wantVersion int64) {
		t.Helper()
		for _, how := range []struct {
			name string
			q    Querier
		}{{"Q", db.Q()}, {"W", db.W()}} {
			d, err := Get[api.Compute](ctx, how.q, KindCompute, "/ws", "gpu")
			if err != nil || d.Value.Properties.Description != wantDesc || d.Version != wantVersion || !d.Created.Equal(at) {
				t.Fatalf("through %s the compute reads %q at version %d, created %s (%v); want %q at %d", how.name,
					d.Value.Properties.Description, d.Version, d.Created, err, wantDesc, wantVersion)
			}
		}
	}
	if err := db.Tx(ctx, func(q Querier) error { return put(q, "one", IfNoneMatch) }); err != nil {
		t.Fatal(err)
	}
	read("one", 1)
	if err := db.Tx(ctx, func(q Querier) error { return put(q, "two", 1) }); err != nil {
		t.Fatal(err)
	}
	read("two", 2)
	refused := errors.New("refused")
	if err := db.Tx(ctx, func(q Querier) error {
		if err := put(q, "three", 2); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("the rolled-back write returned %v", err)
	}
	read("two", 2)
	if err := put(db.W(), "three", 2); err != nil {
		t.Fatal(err)
	}
	read("three", 3)
	if err := Delete(ctx, db.W(), KindCompute, "/ws", "gpu", 2); !errors.Is(err, ErrETagMismatch) {
		t.Fatalf("a delete of another version: %v", err)
	}
	read("three", 3)
	if err := db.Tx(ctx, func(q Querier) error { return Delete(ctx, q, KindCompute, "/ws", "gpu", 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := Get[api.Compute](ctx, db.Q(), KindCompute, "/ws", "gpu"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after its removal the compute reads %v", err)
	}
	if err := put(db.W(), "again", IfNoneMatch); err != nil {
		t.Fatal(err)
	}
	read("again", 1)
}

// Only workspaces and computes are held: another kind is read from SQL
// (here, as another process changed it).
func TestResourceViewHoldsWorkspacesAndComputes(t *testing.T) {
	ctx := context.Background()
	db, other := twoStoresOfOneFile(t)
	at := time.Now()
	for _, kind := range []string{KindCompute, KindBudget} {
		if err := db.Tx(ctx, func(q Querier) error {
			_, err := Put(ctx, q, kind, "/ws", "x", map[string]string{"v": "1"}, 0, at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.W().ExecContext(ctx, `UPDATE resources SET body = '{"v":"2"}'`); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]string{KindCompute: "1", KindBudget: "2"} {
		d, err := Get[map[string]string](ctx, db.Q(), kind, "/ws", "x")
		if err != nil || d.Value["v"] != want {
			t.Errorf("the %s reads %v (%v), want v %s", kind, d.Value, err, want)
		}
	}
}
