package store

import "sync"

// rowView holds rows of one table as this process last wrote or read
// them, so that a read outside a transaction (Q) of one row is answered
// without SQL: a reader connection's look into the WAL after every commit
// of a busy writer, and the read itself, cost more than the answer.
//
// The writer keeps it: a transaction's writes are applied to the view
// once it has committed (discarded when it rolls back), a single write
// outside a transaction (W) at once. It is right only while this process
// is the only writer of the store, so it is kept for SQLite alone, which
// one server serves; PostgreSQL's replicas write the same rows from
// several processes and always read them.
//
// A read that raced a write is not kept: a reader that began before a
// write was applied may have read the row as it was before it, so its row
// is kept only if no write of that row was applied since the read began
// (written, by the view's generation).
type rowView[T any] struct {
	mu    sync.Mutex
	rows  map[string]T      // id → the row as committed
	gen   uint64            // writes applied so far
	wrote map[string]uint64 // id → gen of its last applied write
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
	return &rowView[T]{rows: map[string]T{}, wrote: map[string]uint64{}, own: own, keep: keep, max: max}
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
	v.mu.Lock()
	r, ok = v.rows[id]
	from = v.gen
	v.mu.Unlock()
	if !ok {
		return r, false, from
	}
	return v.own(r), true, from
}

// fill keeps a row read from SQL by a read that began at generation from,
// unless a write of that row was applied since (a nil view keeps nothing).
func (v *rowView[T]) fill(id string, r T, from uint64) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if from < v.floor || v.wrote[id] > from {
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

// apply applies committed writes, in the order they were made.
func (v *rowView[T]) apply(changes []rowChange[T]) {
	if v == nil || len(changes) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range changes {
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
	}
	if len(v.wrote) > maxWrote {
		clear(v.wrote)
		v.floor = v.gen
	}
}

// applyOne applies one committed write.
func (v *rowView[T]) applyOne(c rowChange[T]) { v.apply([]rowChange[T]{c}) }

// forget drops what the view holds of these rows: writes whose commit
// failed may or may not be in the store.
func (v *rowView[T]) forget(changes []rowChange[T]) {
	if v == nil || len(changes) == 0 {
		return
	}
	forgotten := make([]rowChange[T], len(changes))
	for i, c := range changes {
		forgotten[i] = rowChange[T]{id: c.id}
	}
	v.apply(forgotten)
}

// views are the rows a SQLite store's one writer keeps as committed, by
// table (nil on PostgreSQL).
type views struct {
	nodes     *nodeView
	jobs      *jobView
	tokens    *tokenView
	resources *resourceView
}

func newViews() *views {
	return &views{nodes: newNodeView(), jobs: newJobView(), tokens: newTokenView(), resources: newResourceView()}
}

// viewWrite is a write of a row for a view: applied once it has
// committed, forgotten when the commit failed (it may or may not be in
// the store).
type viewWrite interface {
	apply()
	forget()
}

type rowWrite[T any] struct {
	v *rowView[T]
	c rowChange[T]
}

func (w rowWrite[T]) apply()  { w.v.applyOne(w.c) }
func (w rowWrite[T]) forget() { w.v.forget([]rowChange[T]{w.c}) }

// wrote tells the view (of) of q's store, if it keeps views, of a write
// just made through q: queued for the commit of q's transaction, applied
// at once when q wrote outside one.
func wrote[T any](q Querier, of func(*views) *rowView[T], c rowChange[T]) {
	switch q := q.(type) {
	case prepared:
		if q.writes == nil {
			return
		}
		w := rowWrite[T]{of(q.writes), c}
		if q.queue != nil {
			q.queue(w)
		} else {
			w.apply()
		}
	case fencedWriter: // the write was a transaction of its own, committed
		if q.s.views != nil {
			rowWrite[T]{of(q.s.views), c}.apply()
		}
	}
}

// viewOf is the view (of) that answers reads through q: a SQLite store's
// readers' Querier (Q); nil for any other, whose reads go to SQL.
func viewOf[T any](q Querier, of func(*views) *rowView[T]) *rowView[T] {
	if p, ok := q.(prepared); ok && p.reads != nil {
		return of(p.reads)
	}
	return nil
}

func nodesOf(v *views) *nodeView         { return v.nodes }
func jobsOf(v *views) *jobView           { return v.jobs }
func tokensOf(v *views) *tokenView       { return v.tokens }
func resourcesOf(v *views) *resourceView { return v.resources }
