package store

import (
	"context"
	"slices"
	"sync"
)

// rowView holds rows of one table as this process last wrote or read
// them, so that a read of one row is answered without SQL: outside a
// transaction (Q), a reader connection's look into the WAL after every
// commit of a busy writer, and the read itself, cost more than the
// answer; inside one, the row as committed is the view's (unless the
// transaction wrote it).
//
// The writer keeps it, and it is right only while this process is the
// only writer of the store: it is kept for SQLite alone, which one server
// serves; PostgreSQL's replicas write the same rows from several processes
// and always read them. A read from the view must never answer a row
// older than one a read from SQL could already have shown, so:
//
//   - A transaction marks the rows it wrote just before its commit (mark),
//     and settles them just after (settle). A marked row is not answered
//     from the view: its reads go to SQL, which sees the commit the moment
//     it happens. Transactions on the one writer connection commit in the
//     order they mark, so a settle applies its write only if no write of
//     the row was marked since; otherwise, and when the commit failed, the
//     row is dropped and read again.
//   - A write through W or Q would commit before the view heard of it:
//     such a write of a viewed row is made in a transaction of its own
//     (inOwnTx).
//   - A read that raced a write is not kept: a reader that began before a
//     write was marked or settled may have read the row as it was
//     before it, so its row is kept only if no write of that row was marked
//     or settled since the read began (wrote, by the view's generation),
//     and none is pending.
//
// Reads share its lock (a read only looks), so that the many polls reading
// at once queue neither behind each other nor, through them, the writer;
// a commit takes it once for all its writes of the view's rows (marks, then
// settles), not once a row.
type rowView[T any] struct {
	mu    sync.RWMutex
	rows  map[string]T      // id → the row as committed
	gen   uint64            // marks and settles so far
	wrote map[string]uint64 // id → gen of its last mark or settle
	// pending counts a row's marked writes not yet settled; marked is the
	// gen of its last mark (both kept only while pending).
	pending map[string]int
	marked  map[string]uint64
	// floor is the gen when wrote was last emptied: a read that began
	// before it cannot tell whether it raced a write, and is not kept.
	floor uint64
	// own copies a row so that neither the view nor its callers see the
	// other change it in place.
	own func(T) T
	// keep says whether a row is worth holding (nil: every row); one that
	// is not is answered by SQL.
	keep func(T) bool
	// max bounds how many rows are held (0: no bound); past it, rows not
	// held already are left to SQL.
	max int
}

// maxWrote bounds how many rows' last writes the view remembers (their
// ids, for reads racing them) before it forgets them all at once.
const maxWrote = 1 << 16

func newRowView[T any](own func(T) T, keep func(T) bool, max int) *rowView[T] {
	return &rowView[T]{rows: map[string]T{}, wrote: map[string]uint64{}, pending: map[string]int{}, marked: map[string]uint64{},
		own: own, keep: keep, max: max}
}

// rowChange is one write of a row, applied to the view when it is
// committed: the fields it changed of a row the view holds (edit), else
// the row as written (put); with neither, or an edit of a row not held
// and no put, the view holds no such row after it.
type rowChange[T any] struct {
	id   string
	put  *T
	edit func(T) T
}

// get returns a copy of the row as the view holds it.
func (v *rowView[T]) get(id string) (T, bool) {
	r, ok, _ := v.held(id)
	return r, ok
}

// held returns a copy of the row as the view holds it or, when it holds
// none, the view's generation for the read from SQL that follows (fill).
// A nil view holds nothing.
func (v *rowView[T]) held(id string) (r T, ok bool, from uint64) {
	if v == nil {
		return r, false, 0
	}
	v.mu.RLock()
	r, ok = v.rows[id]
	ok = ok && v.pending[id] == 0
	from = v.gen
	v.mu.RUnlock()
	if !ok {
		return r, false, from
	}
	return v.own(r), true, from
}

// fill keeps a row read from SQL by a read that began at generation from,
// unless a write of that row was marked or settled since or is pending (a
// nil view keeps nothing).
func (v *rowView[T]) fill(id string, r T, from uint64) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if from < v.floor || v.wrote[id] > from || v.pending[id] > 0 {
		return
	}
	if _, ok := v.rows[id]; !ok && v.holds(r, false) {
		v.rows[id] = v.own(r)
	}
}

// holds says whether the view keeps row r (held: it holds it already).
func (v *rowView[T]) holds(r T, held bool) bool {
	return (v.keep == nil || v.keep(r)) && (held || v.max == 0 || len(v.rows) < v.max)
}

// mark notes, just before its transaction commits, a write of row c.id:
// until it is settled the row's reads go to SQL. It returns the mark's
// generation, for settle. v.mu is held.
func (v *rowView[T]) mark(id string) uint64 {
	v.gen++
	v.wrote[id], v.marked[id] = v.gen, v.gen
	v.pending[id]++
	return v.gen
}

// settle ends the mark (at) of write c once its transaction's commit
// returned: a committed write is applied unless another write of the row
// was marked since (committed after it); that one, and a write whose
// commit failed (it may or may not be in the store), drop the row. v.mu is
// held.
func (v *rowView[T]) settle(c rowChange[T], at uint64, committed bool) {
	if !committed || v.marked[c.id] != at {
		c = rowChange[T]{id: c.id}
	}
	v.change(c)
	if v.pending[c.id]--; v.pending[c.id] <= 0 {
		delete(v.pending, c.id)
		delete(v.marked, c.id)
	}
}

// change applies one write to the rows held; v.mu is held.
func (v *rowView[T]) change(c rowChange[T]) {
	v.gen++
	v.wrote[c.id] = v.gen
	r, held := v.rows[c.id]
	switch {
	case held && c.edit != nil:
		r = c.edit(r)
	case c.put != nil:
		r = v.own(*c.put)
	}
	if (held && c.edit != nil || c.put != nil) && v.holds(r, held) {
		v.rows[c.id] = r
	} else {
		delete(v.rows, c.id)
	}
	if len(v.wrote) > maxWrote {
		clear(v.wrote)
		v.floor = v.gen
	}
}

// views are the rows a SQLite store's one writer keeps as committed, by
// table (nil on PostgreSQL).
type views struct {
	nodes     *nodeView
	jobs      *jobView
	tokens    *tokenView
	resources *resourceView
	grants    *grantView
	locks     *lockView
}

func newViews() *views {
	return &views{nodes: newNodeView(), jobs: newJobView(), tokens: newTokenView(), resources: newResourceView(), grants: newGrantView(), locks: newLockView()}
}

// viewWrite is a transaction's write of a row a view holds: marked just
// before the commit, settled once it returned, each with its view's lock
// held (inLocks).
type viewWrite interface {
	mark()
	settle(committed bool)
	row() viewedRow
	lock() sync.Locker // its view's
}

// inLocks runs do on each of a transaction's writes, in their order,
// taking each view's lock once for all its writes: a commit of thousands
// of rows waits for the polls reading a view once, not once a row.
// Writes of different views do not depend on each other's order.
func inLocks(ws []viewWrite, do func(viewWrite)) {
	var locks []sync.Locker
	for _, w := range ws {
		if l := w.lock(); !slices.Contains(locks, l) {
			locks = append(locks, l)
		}
	}
	for _, l := range locks {
		l.Lock()
		for _, w := range ws {
			if w.lock() == l {
				do(w)
			}
		}
		l.Unlock()
	}
}

// viewedRow names a row of a view.
type viewedRow struct {
	view any // *rowView[T]
	id   string
}

type rowWrite[T any] struct {
	v  *rowView[T]
	c  rowChange[T]
	at uint64 // the generation of its mark
}

func (w *rowWrite[T]) mark()                 { w.at = w.v.mark(w.c.id) }
func (w *rowWrite[T]) settle(committed bool) { w.v.settle(w.c, w.at, committed) }
func (w *rowWrite[T]) row() viewedRow        { return viewedRow{w.v, w.c.id} }
func (w *rowWrite[T]) lock() sync.Locker     { return &w.v.mu }

// wrote tells the view (of) of q's store, if it keeps views, of a write
// just made through q's transaction, for its commit. (A write of these
// rows through a store's W is made in a transaction of its own: inOwnTx.)
func wrote[T any](q Querier, of func(*views) *rowView[T], c rowChange[T]) {
	if p, ok := q.(prepared); ok && p.queue != nil {
		p.queue(&rowWrite[T]{v: of(p.reads), c: c})
	}
}

// inOwnTx runs fn in a transaction of its own when q is a SQLite store's
// W or Q (or its fenced store's W), which would write the rows a view
// holds outside a transaction: the view would hear of such a write only
// after it committed, too late to mark the row (and a write through Q
// not at all). It reports false, having done nothing, for any other q.
func inOwnTx(ctx context.Context, q Querier, fn func(Querier) error) (bool, error) {
	var tx func(context.Context, func(Querier) error) error
	switch q := q.(type) {
	case prepared:
		if q.queue == nil {
			tx = q.tx // nil but on a SQLite store's W and Q
		}
	case fencedWriter:
		if q.s.views != nil {
			tx = q.s.Tx
		}
	}
	if tx == nil {
		return false, nil
	}
	return true, tx(ctx, fn)
}

// viewOf is the view (of) that answers a read of row id through q: a
// SQLite store's readers' Querier (Q), or its writer's in a transaction
// that has not written the row (the one writer's transaction sees what
// was committed last, as the view holds it); nil for any other, whose
// reads go to SQL.
func viewOf[T any](q Querier, of func(*views) *rowView[T], id string) *rowView[T] {
	p, ok := q.(prepared)
	if !ok || p.reads == nil {
		return nil
	}
	v := of(p.reads)
	if p.wroteRow != nil && p.wroteRow(viewedRow{v, id}) {
		return nil
	}
	return v
}

func nodesOf(v *views) *nodeView         { return v.nodes }
func jobsOf(v *views) *jobView           { return v.jobs }
func tokensOf(v *views) *tokenView       { return v.tokens }
func resourcesOf(v *views) *resourceView { return v.resources }
func grantsOf(v *views) *grantView       { return v.grants }
func locksOf(v *views) *lockView         { return v.locks }
