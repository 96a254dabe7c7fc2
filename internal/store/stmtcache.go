package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the statement cache; queries past it run
// unprepared (queries are program text, so a few dozen in practice).
const maxCachedStmts = 512

// stmtCache is a Querier over a *sql.DB that prepares each query text once
// and reuses it: the SQLite driver would otherwise parse and plan every
// statement on every call (14 % of the control plane's CPU at scale).
// database/sql keeps a statement prepared on each connection it ran on.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}} }

// cached returns the prepared statement of query, or nil if there is none.
func (c *stmtCache) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// prepare returns query's statement, preparing it on first use; nil (run
// it unprepared) when the cache is full or preparing failed (the
// unprepared call then reports the error).
func (c *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	if s := c.cached(query); s != nil {
		return s
	}
	c.mu.Lock()
	full := len(c.stmts) >= maxCachedStmts
	c.mu.Unlock()
	if full {
		return nil
	}
	s, err := c.db.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.stmts[query]; old != nil {
		s.Close() // prepared meanwhile by another caller
		return old
	}
	c.stmts[query] = s
	return s
}

// querier runs queries through the cache's statements.
func (c *stmtCache) querier(note func(any), watching func() bool) prepared {
	return prepared{stmt: c.prepare, plain: c.db, note: note, watching: watching, engine: sqliteEngine}
}

// prepared is a Querier that runs each query through the statement stmt
// gives for it, or through plain when it gives none.
type prepared struct {
	stmt  func(ctx context.Context, query string) *sql.Stmt
	plain Querier
	// note is told of a status change (JobTransition, NodeTransition)
	// written through this Querier; nil, or watching false: nobody
	// listens, and writes do not look up the status they replace.
	note     func(any)
	watching func() bool
	engine   engine // the SQL engine behind plain
	// reads, on the Queriers of a store that keeps views (its readers'
	// and its transactions'), answers reads of one row. In a transaction,
	// queue takes each write of a row a view holds (wrote) for the commit,
	// and wroteRow says whether it wrote a row (whose reads then go to
	// SQL). tx, on a SQLite store's W and Q, is its Tx.
	reads    *views
	queue    func(viewWrite)
	wroteRow func(viewedRow) bool
	tx       func(context.Context, func(Querier) error) error
}

// noting returns q as a prepared Querier whose changes someone listens to.
func noting(q Querier) (prepared, bool) {
	if f, ok := q.(fencedWriter); ok { // each write its own transaction: tell at once
		return prepared{note: f.s.noteNow}, f.s.watched()
	}
	p, ok := q.(prepared)
	return p, ok && p.note != nil && (p.watching == nil || p.watching())
}

func (p prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := p.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return p.plain.ExecContext(ctx, query, args...)
}

func (p prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := p.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return p.plain.QueryContext(ctx, query, args...)
}

func (p prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := p.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return p.plain.QueryRowContext(ctx, query, args...)
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.stmts {
		s.Close()
	}
	c.stmts = map[string]*sql.Stmt{}
}

// txStmts is a transaction's Querier: it uses the writer's prepared
// statements. One not in the writer's cache cannot be prepared there now
// (the one writer connection is this transaction's): it is prepared for
// this transaction alone, and DB.Tx adds it to the cache after the commit.
type txStmts struct {
	tx     *sql.Tx
	cache  *stmtCache
	local  map[string]*sql.Stmt // prepared on this transaction
	missed []string
	// changed are the job status changes written in this transaction;
	// the observer hears of them after the commit.
	changed []any
	// wrote are this transaction's writes of rows the store's views hold,
	// for them after the commit (nil views: not recorded).
	views   *views
	wrote   []viewWrite
	written map[viewedRow]bool
}

func (t *txStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	if s := t.local[query]; s != nil {
		return s
	}
	var s *sql.Stmt
	if c := t.cache.cached(query); c != nil {
		s = t.tx.StmtContext(ctx, c)
	} else {
		var err error
		if s, err = t.tx.PrepareContext(ctx, query); err != nil {
			return nil // the unprepared call reports the error
		}
		t.missed = append(t.missed, query)
	}
	if t.local == nil {
		t.local = map[string]*sql.Stmt{}
	}
	t.local[query] = s
	return s
}

// querier runs the transaction's queries through its statements.
func (t *txStmts) querier(observed bool) Querier {
	p := prepared{stmt: t.stmt, plain: t.tx}
	if observed {
		p.note = func(c any) { t.changed = append(t.changed, c) }
	}
	if t.views != nil {
		p.reads = t.views
		p.queue = func(w viewWrite) {
			t.wrote = append(t.wrote, w)
			if t.written == nil {
				t.written = map[viewedRow]bool{}
			}
			t.written[w.row()] = true
		}
		p.wroteRow = func(r viewedRow) bool { return t.written[r] }
	}
	return p
}

// marking marks the transaction's writes of rows the views hold, just
// before its commit: their reads go to SQL until committed settles them.
func (t *txStmts) marking() {
	inLocks(t.wrote, viewWrite.mark)
}

// committed settles the transaction's writes once its commit returned:
// applied to the views when it committed (err nil); when it failed they
// may or may not be in the store, and the views drop those rows.
func (t *txStmts) committed(err error) {
	inLocks(t.wrote, func(w viewWrite) { w.settle(err == nil) })
}
