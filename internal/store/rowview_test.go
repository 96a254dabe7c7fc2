package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// commit marks and settles one committed write, as a transaction does.
func commit[T any](v *rowView[T], c rowChange[T]) {
	w := &rowWrite[T]{v: v, c: c}
	mark(w)
	settle(w, true)
}

// mark and settle are a transaction's mark and settle of one write.
func mark(w viewWrite) { inLocks([]viewWrite{w}, viewWrite.mark) }
func settle(w viewWrite, committed bool) {
	inLocks([]viewWrite{w}, func(w viewWrite) { w.settle(committed) })
}

// Between a transaction's commit and the view's settling of it, the row
// is read from SQL: the view never answers the row as it was before a
// commit another read could already have seen.
func TestViewAnswersNoMarkedRow(t *testing.T) {
	v := newNodeView()
	old, fresh := viewNode("n1"), viewNode("n1")
	fresh.State = api.NodeRunning
	commit(v, nodeChange{id: "n1", put: &old})

	w := &rowWrite[Node]{v: v, c: nodeChange{id: "n1", put: &fresh}}
	mark(w) // the commit is under way, or done and not yet settled
	if got, ok := v.get("n1"); ok {
		t.Fatalf("a marked node was answered from the view: %s", got.State)
	}
	from := begin(v)
	v.fill("n1", old, from) // a read from SQL made before the commit
	settle(w, true)
	if got, ok := v.get("n1"); !ok || got.State != api.NodeRunning {
		t.Fatalf("after its settle the node reads %+v (%v), want the committed write", got, ok)
	}

	// A read that began while the write was marked, ending after it
	// settled, may have read the row before the commit: not kept.
	commit(v, nodeChange{id: "n1"}) // removed
	w = &rowWrite[Node]{v: v, c: nodeChange{id: "n1", put: &fresh}}
	mark(w)
	from = begin(v)
	settle(w, true)
	commit(v, nodeChange{id: "n1"}) // and a removal after it
	v.fill("n1", old, from)
	if got, ok := v.get("n1"); ok {
		t.Fatalf("a read made while a write was pending was kept: %s", got.State)
	}
}

// Transactions on the one writer commit in the order they mark; their
// settles may come in another order. A write settled after a later one
// is not applied over it, and a failed commit leaves nothing.
func TestViewAppliesNoWriteOverALaterOne(t *testing.T) {
	v := newNodeView()
	first, second := viewNode("n1"), viewNode("n1")
	first.State, second.State = api.NodeLeaving, api.NodeRunning

	a := &rowWrite[Node]{v: v, c: nodeChange{id: "n1", put: &first}}
	b := &rowWrite[Node]{v: v, c: nodeChange{id: "n1", put: &second}}
	mark(a)
	mark(b)
	settle(b, true)
	if _, ok := v.get("n1"); ok {
		t.Fatal("the node was answered while an earlier write of it was unsettled")
	}
	settle(a, true)
	if got, ok := v.get("n1"); ok && got.State == api.NodeLeaving {
		t.Fatal("an earlier write settled last replaced the later one")
	}

	commit(v, nodeChange{id: "n1", put: &first})
	c := &rowWrite[Node]{v: v, c: nodeChange{id: "n1", put: &second}}
	mark(c)
	settle(c, false)
	if got, ok := v.get("n1"); ok {
		t.Fatalf("after a failed commit the view still answers the node (%s)", got.State)
	}
}

// A commit takes each view's lock once for its writes: a transaction that
// wrote a node, a job and the node again leaves the node as written last.
func TestViewSettlesATransactionsWritesInOrder(t *testing.T) {
	vs := newViews()
	first, second := viewNode("n1"), viewNode("n1")
	first.State, second.State = api.NodeLeaving, api.NodeRunning
	job := jobRow{compute: "c", status: api.JobRunning, body: "{}"}
	ws := []viewWrite{
		&rowWrite[Node]{v: vs.nodes, c: nodeChange{id: "n1", put: &first}},
		&rowWrite[jobRow]{v: vs.jobs, c: jobChange{id: "j1", put: &job}},
		&rowWrite[Node]{v: vs.nodes, c: nodeChange{id: "n1", put: &second}},
	}
	inLocks(ws, viewWrite.mark)
	if _, ok := vs.nodes.get("n1"); ok {
		t.Fatal("a node written by a transaction being committed was answered from the view")
	}
	inLocks(ws, func(w viewWrite) { w.settle(true) })
	if got, ok := vs.nodes.get("n1"); !ok || got.State != api.NodeRunning {
		t.Fatalf("after the commit the node reads %+v (%v), want its last write (running)", got.State, ok)
	}
	if _, ok := vs.jobs.get("j1"); !ok {
		t.Fatal("the job written in the same transaction is not in the view")
	}
}

// A write of a viewed row through W is made in a transaction of its own,
// marked before its commit like any other.
func TestViewKeepsAWriteThroughW(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sqliteOnly(t, db)
	n := viewNode("n1")
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.views.nodes.get("n1"); !ok {
		t.Fatal("a node written in a transaction is not in the view")
	}
	obs := &recordingObserver{}
	db.SetObserver(obs)
	n.State = api.NodeLeaving
	if err := PutNode(ctx, db.W(), n); err != nil {
		t.Fatal(err)
	}
	if got, ok := db.views.nodes.get("n1"); !ok || got.State != api.NodeLeaving {
		t.Fatalf("after a write through W the view holds %+v (%v), want the node as written", got, ok)
	}
	if len(obs.txs) != 1 || !obs.txs[0] {
		t.Fatalf("the write through W made transactions %v, want one committed", obs.txs)
	}
}

// A transaction reads the rows it wrote as it wrote them, from SQL, and
// the others as committed; what it wrote and rolled back is not seen.
func TestATransactionReadsItsOwnWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	n := viewNode("n1")
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}
	if _, err := GetNode(ctx, db.Q(), "n1"); err != nil { // held by the view
		t.Fatal(err)
	}
	undo := errors.New("undo")
	err := db.Tx(ctx, func(q Querier) error {
		if got, err := GetNode(ctx, q, "n1"); err != nil || got.State != api.NodeIdle {
			return fmt.Errorf("before its write the transaction reads %+v (%v)", got, err)
		}
		m := n
		m.State = api.NodeLeaving
		if err := PutNode(ctx, q, m); err != nil {
			return err
		}
		if got, err := GetNode(ctx, q, "n1"); err != nil || got.State != api.NodeLeaving {
			return fmt.Errorf("after its write the transaction reads %+v (%v), want its write", got, err)
		}
		return undo
	})
	if !errors.Is(err, undo) {
		t.Fatal(err)
	}
	if got, err := GetNode(ctx, db.Q(), "n1"); err != nil || got.State != api.NodeIdle {
		t.Fatalf("after the rollback the node reads %+v (%v), want it as committed", got, err)
	}
}

// Under concurrent writers in two groups of transactions (the server's
// and a lease holder's, as the API and the controllers write) and
// concurrent readers, no read of a compute or a node shows a version
// older than one its reader was already shown, by the view or by SQL,
// and a writer reads back at least what it wrote.
func TestViewReadsNeverGoBack(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sqliteOnly(t, db)
	l, ok, err := db.AcquireLease(ctx, "controllers", "a", time.Now(), time.Hour)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	groups := []*DB{db, db.Fenced(Fence{Lease: "controllers", Holder: "a", Token: l.Token})}
	type compute struct{ N int }
	if _, err := Put(ctx, db.W(), KindCompute, "/ws", "c", compute{}, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, viewNode("n1")) }); err != nil {
		t.Fatal(err)
	}
	const writes = 300
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	done := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := groups[w%2]
			for range writes / 4 {
				var version int64
				var tokenHash string
				err := g.Tx(ctx, func(q Querier) error {
					d, err := Get[compute](ctx, q, KindCompute, "/ws", "c")
					if err != nil {
						return err
					}
					var inSQL int64
					if err := q.QueryRowContext(ctx, `SELECT version FROM resources WHERE kind = ? AND name = 'c'`, KindCompute).Scan(&inSQL); err != nil {
						return err
					}
					if d.Version != inSQL {
						fail("a transaction read the compute at version %d, its SQL at %d", d.Version, inSQL)
					}
					if version, err = Put(ctx, q, KindCompute, "/ws", "c", compute{d.Value.N + 1}, d.Version, time.Now()); err != nil {
						return err
					}
					n, err := GetNode(ctx, q, "n1")
					if err != nil {
						return err
					}
					var hash string
					if err := q.QueryRowContext(ctx, `SELECT json_extract(body, '$.tokenHash') FROM nodes WHERE id = 'n1'`).Scan(&hash); err != nil {
						return err
					}
					if n.TokenHash != hash {
						fail("a transaction that wrote the compute read the node at %s, its SQL at %s", n.TokenHash, hash)
					}
					n.TokenHash = fmt.Sprint(version)
					tokenHash = n.TokenHash
					return PutNode(ctx, q, n)
				})
				if errors.Is(err, ErrETagMismatch) {
					continue
				}
				if err != nil {
					fail("write: %v", err)
					return
				}
				if d, err := Get[compute](ctx, db.Q(), KindCompute, "/ws", "c"); err != nil || d.Version < version {
					fail("a writer that wrote version %d reads %d (%v)", version, d.Version, err)
				}
				if n, err := GetNode(ctx, db.Q(), "n1"); err != nil || atoi(n.TokenHash) < atoi(tokenHash) {
					fail("a writer that wrote the node at %s reads it at %s (%v)", tokenHash, n.TokenHash, err)
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var seen, seenNode int64
			for {
				select {
				case <-done:
					return
				default:
				}
				// From SQL (a transaction's read), then from the view.
				var sqlVersion int64
				if err := db.ro.QueryRowContext(ctx, `SELECT version FROM resources WHERE kind = ? AND name = 'c'`, KindCompute).Scan(&sqlVersion); err != nil {
					fail("read: %v", err)
					return
				}
				seen = max(seen, sqlVersion)
				d, err := Get[compute](ctx, db.Q(), KindCompute, "/ws", "c")
				if err != nil || d.Version < seen {
					fail("the compute read version %d after version %d was shown (%v)", d.Version, seen, err)
					return
				}
				seen = d.Version
				var body string
				if err := db.ro.QueryRowContext(ctx, `SELECT json_extract(body, '$.tokenHash') FROM nodes WHERE id = 'n1'`).Scan(&body); err != nil {
					fail("read node: %v", err)
					return
				}
				seenNode = max(seenNode, atoi(body))
				n, err := GetNode(ctx, db.Q(), "n1")
				if err != nil || atoi(n.TokenHash) < seenNode {
					fail("the node read at %s after %d was shown (%v)", n.TokenHash, seenNode, err)
					return
				}
				seenNode = atoi(n.TokenHash)
			}
		}()
	}
	wg.Wait()
	close(done)
	readers.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func atoi(s string) int64 {
	var n int64
	fmt.Sscan(s, &n)
	return n
}
