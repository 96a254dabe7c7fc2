package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func viewNode(id string) Node {
	return Node{ID: id, Compute: "/c/cpu", State: api.NodeIdle, VMSize: "Standard_D2_v2", Provider: "local",
		Created: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), TokenHash: "h1", GPUs: []int{}}
}

// A read of a node outside a transaction shows every committed write of
// it, however written (a transaction, a batch, the writer alone), and
// nothing of a transaction that was rolled back.
func TestNodeReadsFollowCommittedWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	read := func() (Node, error) {
		t.Helper()
		return GetNode(ctx, db.Q(), "n1")
	}
	if _, err := read(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a node never written reads %v, want not found", err)
	}
	n := viewNode("n1")
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err != nil || got.State != api.NodeIdle || got.TokenHash != "h1" {
		t.Fatalf("after its write the node reads %+v (%v)", got, err)
	}
	if err := db.Tx(ctx, func(q Querier) error {
		ok, err := ClaimIdleNodes(ctx, q, []string{"n1"}, "job-1")
		if err == nil && !ok {
			err = errors.New("not claimed")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err != nil || got.State != api.NodeRunning || got.JobID != "job-1" || got.TokenHash != "h1" {
		t.Fatalf("after its claim the node reads %+v (%v), want running job-1", got, err)
	}
	refused := errors.New("refused")
	err := db.Tx(ctx, func(q Querier) error {
		n.State, n.JobID, n.TokenHash = api.NodeLeaving, "", "h2"
		if err := PutNode(ctx, q, n); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("the rolled-back transaction returned %v", err)
	}
	if got, err := read(); err != nil || got.State != api.NodeRunning || got.TokenHash != "h1" {
		t.Fatalf("after a rolled-back write the node reads %+v (%v), want it as committed before", got, err)
	}
	n.State, n.JobID, n.TokenHash = api.NodeIdle, "", "h3"
	if err := PutNode(ctx, db.W(), n); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err != nil || got.State != api.NodeIdle || got.TokenHash != "h3" {
		t.Fatalf("after a write outside a transaction the node reads %+v (%v)", got, err)
	}
	if err := db.Tx(ctx, func(q Querier) error { return DeleteNode(ctx, q, "n1", n.Created) }); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after its removal the node reads %+v (%v), want not found", got, err)
	}
}

// The node a read gets from the view is the one SQL gives: the document
// as stored and decoded (times in UTC, an empty list as none), not the
// value its writer held.
func TestNodeViewHoldsTheDocumentAsStored(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sqliteOnly(t, db)
	n := viewNode("n1")
	n.Created = time.Now().In(time.FixedZone("CET", 3600)) // a monotonic reading and a zone the document loses
	n.Wait = &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: "Priority"}
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}
	viewed, err := GetNode(ctx, db.Q(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := getNode(ctx, db.Q(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viewed, stored) {
		t.Fatalf("the view holds\n%+v\nSQL reads\n%+v", viewed, stored)
	}
	// A caller's change in place reaches neither the view nor the next caller.
	viewed.Wait.Reason = "Resources"
	viewed.GPUs = append(viewed.GPUs, 3)
	again, _ := GetNode(ctx, db.Q(), "n1")
	if again.Wait.Reason != "Priority" || len(again.GPUs) != 0 {
		t.Fatalf("a caller's change in place shows in the next read: %+v %v", *again.Wait, again.GPUs)
	}
}

// A SQLite store's server is its only writer, and reads a node from what
// it wrote: a change made to the file by another process is not seen.
// (This is why the view is SQLite's alone: PostgreSQL's replicas share
// their rows.)
func TestNodeReadsAreAnsweredFromTheView(t *testing.T) {
	ctx := context.Background()
	db, other := twoStoresOfOneFile(t)
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, viewNode("n1")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := other.W().ExecContext(ctx, `UPDATE nodes SET body = json_set(body, '$.state', 'leaving')`); err != nil {
		t.Fatal(err)
	}
	if got, err := GetNode(ctx, db.Q(), "n1"); err != nil || got.State != api.NodeIdle {
		t.Fatalf("the node reads %+v (%v): not from the view", got, err)
	}
	if got, err := GetNode(ctx, other.Q(), "n1"); err != nil || got.State != api.NodeLeaving {
		t.Fatalf("the other store reads %+v (%v), want the row as changed", got, err)
	}
}

// begin is the view's generation for a read from SQL starting now.
func begin[T any](v *rowView[T]) uint64 {
	_, _, from := v.held("")
	return from
}

// twoStoresOfOneFile opens one SQLite file twice, as two processes would:
// a server's store and another's, which changes rows behind its back.
func twoStoresOfOneFile(t *testing.T) (db, other *DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	for _, s := range []**DB{&db, &other} {
		var err error
		if *s, err = OpenSQLite(context.Background(), path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*s).Close() })
	}
	return db, other
}

// A read that began before a write of its node was applied may hold the
// node as it was: the view does not keep it, neither over the write nor
// over the node's removal, nor when it can no longer tell.
func TestNodeViewKeepsNoReadThatRacedAWrite(t *testing.T) {
	v := newNodeView()
	old, fresh := viewNode("n1"), viewNode("n1")
	fresh.State = api.NodeRunning

	from := begin(v)
	commit(v, nodeChange{id: "n1", put: &fresh})
	v.fill("n1", old, from)
	if got, _ := v.get("n1"); got.State != api.NodeRunning {
		t.Fatalf("a read that raced a write left the node %s", got.State)
	}

	from = begin(v)
	commit(v, nodeChange{id: "n1"})
	v.fill("n1", old, from)
	if got, ok := v.get("n1"); ok {
		t.Fatalf("a read that raced the node's removal brought it back: %+v", got)
	}

	v.fill("n1", old, begin(v)) // no write since: kept
	if _, ok := v.get("n1"); !ok {
		t.Fatal("a read that raced nothing was not kept")
	}

	from = begin(v)
	for i := range maxWrote + 1 { // the view forgets which nodes it wrote
		id := string(rune('a'+i%26)) + time.Duration(i).String()
		commit(v, nodeChange{id: id})
	}
	v.fill("n2", viewNode("n2"), from)
	if _, ok := v.get("n2"); ok {
		t.Fatal("a read from before the view forgot its writes was kept")
	}
	commit(v, nodeChange{id: "n2", edit: claimed("job-1")}) // a claim of a node not held adds nothing
	if _, ok := v.get("n2"); ok {
		t.Fatal("a claim made up a node the view did not hold")
	}
}
