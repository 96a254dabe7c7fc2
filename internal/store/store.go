// Package store keeps Cumulus's state: one SQL database (embedded SQLite by
// default), every change a transaction, optimistic concurrency by etag.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/cumulus-ml/cumulus/internal/batch"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite"
)

// Errors callers check with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrETagMismatch = errors.New("etag mismatch")
	// ErrConflict: a concurrent transaction changed what this one read;
	// the caller may try again.
	ErrConflict = errors.New("concurrent change")
)

// DB is the store. Its methods run in their own transaction; Tx runs
// several in one.
type DB struct {
	engine engine
	db     *sql.DB // SQLite: the one writer connection, where transactions run; PostgreSQL: the pool
	ro     *sql.DB // SQLite: readers (WAL lets them read while a transaction writes); PostgreSQL: the pool

	w, r   *stmtCache // prepared statements of each
	wq, rq Querier    // their Queriers

	obs atomic.Pointer[observerBox] // told what the store did (metrics)

	fence *Fence // when set, every transaction first checks this lease (see Fenced)

	group *batch.Group[*txCall] // SQLite: transactions waiting for the writer, written together

	views *views // SQLite: rows as this process wrote or read them (nil: PostgreSQL)

	ckpt *checkpointer // SQLite: copies the write-ahead log into the database file, off the writer
}

// Observer is told what the store did, for metrics. Its methods run on the
// writer's goroutine, after the transaction ended: they must be quick and
// must not call the store.
type Observer interface {
	// TxDone reports one transaction (Tx): how long it took, from begin
	// to commit or rollback, and whether it committed.
	TxDone(d time.Duration, committed bool)
	// JobTransition reports a committed change of a job's status.
	JobTransition(t JobTransition)
	// NodeTransition reports a committed change of a node's state made
	// by PutNode (ClaimIdleNodes' idle → running is not reported).
	NodeTransition(t NodeTransition)
}

// NodeTransition is a change of a node's state.
type NodeTransition struct {
	Compute  string // the compute's ARM id as the node records it
	From, To string // api.Node* states; From is "" for a new node
	Reason   string // why it is unusable or leaving, as the node records it
	// Provisioned is the time from the node's request to its agent's
	// registration; set only on the change out of preparing of a node
	// that registered (zero otherwise).
	Provisioned time.Duration
}

// tell passes one change to the observer.
func tell(o Observer, c any) {
	switch c := c.(type) {
	case JobTransition:
		o.JobTransition(c)
	case NodeTransition:
		o.NodeTransition(c)
	}
}

// JobTransition is a change of a job's status.
type JobTransition struct {
	Compute  string // the compute's key (lower case ARM id)
	From, To string // api.Job* statuses; From is "" for a new job
	// Queued is the time from submission to the job's first start; it is
	// set only on the first change to Running (zero otherwise).
	Queued time.Duration
}

type observerBox struct{ o Observer }

// SetObserver makes o hear of transactions and job status changes from
// now on (nil: nobody).
func (s *DB) SetObserver(o Observer) {
	if o == nil {
		s.obs.Store(nil)
		return
	}
	s.obs.Store(&observerBox{o})
}

func (s *DB) observer() Observer {
	if b := s.obs.Load(); b != nil {
		return b.o
	}
	return nil
}

// noteNow tells the observer of a change written outside a transaction.
func (s *DB) noteNow(c any) {
	if o := s.observer(); o != nil {
		tell(o, c)
	}
}

func (s *DB) watched() bool { return s.observer() != nil }

// Querier is what both *sql.DB and *sql.Tx offer.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readConns is how many connections SQLite's readers share.
const readConns = 4

// readerMmap is how much of the database file SQLite's readers map.
const readerMmap = 256 << 20

// OpenSQLite opens (creating if needed) the SQLite database at path, in
// WAL mode, and brings its schema up to date. A new database file is
// readable by its owner only (0600), and so are the -wal and -shm files
// SQLite makes beside it (it gives them the database file's mode).
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // SQLite would make it 0644
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	// The writer's page cache is 32 MiB (the default is 2 MiB): a
	// scheduling pass or a batch of agent reports touches more pages
	// than 2 MiB holds, and SQLite spilled them to the WAL file in the
	// middle of the transaction. As the only writer, its cache also stays
	// valid from one transaction to the next (a reader's is dropped at
	// every commit in WAL mode, so the readers keep the default).
	// Temporary storage in memory keeps statement journals (the pages a
	// statement with triggers may have to undo on its own) out of a
	// temporary file: they were a write system call per page.
	//
	// The writer never checkpoints the write-ahead log itself unless it
	// has grown long: a checkpointer of its own does (checkpoint.go).
	db, err := sql.Open("sqlite", dsn+"&_pragma=cache_size(-32768)&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	// One writer connection: SQLite has one writer anyway, and a single
	// connection makes every transaction serial without busy retries.
	db.SetMaxOpenConns(1)
	s := &DB{db: db, engine: sqliteEngine, group: &batch.Group[*txCall]{Max: maxTxBatch}}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// Readers on their own pool, so a read never waits for a transaction
	// (and a read made while one is open cannot deadlock on the writer).
	// A reader's page cache is dropped whenever another connection has
	// committed, which under load is before nearly every read: the pages
	// it reads again come from a map of the file (readerMmap) rather than
	// each by a read system call into a fresh buffer. The mapped pages are
	// the kernel's page cache, counted in the server's RSS when touched.
	ro, err := sql.Open("sqlite", dsn+fmt.Sprintf("&_pragma=mmap_size(%d)", readerMmap))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	// Every reader connection stays open once made: database/sql keeps two
	// idle ones by default, so under four concurrent reads it closed two
	// after each use and opened them again for the next, each opening
	// parsing the schema and preparing its statements anew (a quarter of
	// the server's CPU while simulated nodes polled).
	ro.SetMaxOpenConns(readConns)
	ro.SetMaxIdleConns(readConns)
	s.ro = ro
	if s.ckpt, err = newCheckpointer(dsn); err != nil {
		ro.Close()
		db.Close()
		return nil, err
	}
	s.ckpt.committed(ctx, db) // what the migrations wrote
	s.w, s.r = newStmtCache(db), newStmtCache(ro)
	// The one server of a SQLite store is its only writer: it keeps the
	// nodes, the jobs on them, the tokens, role assignments, locks,
	// workspaces and computes as it wrote or read them (views); its W and
	// Q write those rows in transactions.
	s.views = newViews()
	wq, rq := s.w.querier(s.noteNow, s.watched), s.r.querier(nil, nil)
	rq.reads = s.views
	wq.tx, rq.tx = s.Tx, s.Tx
	s.wq, s.rq = wq, rq
	return s, nil
}

// Close closes the database.
func (s *DB) Close() error {
	ckptErr := s.ckpt.close() // before the writer: the last connection to close checkpoints the rest
	if s.w != nil {
		s.w.close()
		s.r.close()
	}
	if s.ro == s.db {
		return errors.Join(ckptErr, s.db.Close())
	}
	return errors.Join(ckptErr, s.ro.Close(), s.db.Close())
}

// Tx runs fn in one transaction, committed if fn returns nil. On
// PostgreSQL transactions run on a snapshot and one that conflicts with
// another is run again: fn may run more than once, so it must only assign
// the variables it shares with its caller, never append to them.
func (s *DB) Tx(ctx context.Context, fn func(q Querier) error) (err error) {
	if s.engine == postgresEngine {
		return s.pgTx(ctx, fn)
	}
	return s.groupTx(ctx, fn)
}

// soloTx runs fn in a transaction of its own on the writer.
func (s *DB) soloTx(ctx context.Context, fn func(q Querier) error) (err error) {
	obs := s.observer()
	var ts *txStmts
	if obs != nil {
		start := time.Now()
		defer func() {
			obs.TxDone(time.Since(start), err == nil)
			if err == nil && ts != nil {
				for _, c := range ts.changed {
					tell(obs, c)
				}
			}
		}()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var q Querier = prepared{stmt: noStmt, plain: tx, engine: sqliteEngine}
	if s.w != nil { // nil while migrating
		ts = &txStmts{tx: tx, cache: s.w, views: s.views}
		q = ts.querier(obs != nil)
	}
	if err := s.checkFence(ctx, q); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(q); err != nil {
		_ = tx.Rollback()
		return err
	}
	if ts != nil {
		ts.marking()
	}
	err = tx.Commit()
	if ts != nil {
		ts.committed(err)
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ts != nil {
		for _, query := range ts.missed {
			s.w.prepare(ctx, query) // the writer is free again
		}
	}
	return nil
}

// Q is for reads outside a transaction (it sees committed data). A
// single write outside a transaction goes through W.
func (s *DB) Q() Querier { return s.rq }

// W is the writer connection, for one write statement outside a
// transaction. Never use it inside Tx: the writer is busy there.
func (s *DB) W() Querier { return s.wq }

func (s *DB) migrate(ctx context.Context) error {
	if s.engine == postgresEngine {
		return s.migratePostgres(ctx)
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("migrate: database schema version %d is newer than this binary knows (%d); upgrade cumulus", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		err := s.Tx(ctx, func(q Querier) error {
			if err := execScript(ctx, q, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			_, err := q.ExecContext(ctx, `UPDATE schema_version SET version = ?`, i+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// execScript runs the statements of a migration, split at ";" + newline.
func execScript(ctx context.Context, q Querier, script string) error {
	for _, stmt := range strings.Split(script, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := q.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
