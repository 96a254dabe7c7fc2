package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL driver, registered as "pgx"
)

// PostgreSQL connection pool and retry bounds.
const (
	// pgTxAttempts bounds how often a transaction that conflicted with
	// another (serialization failure, deadlock) is run again.
	pgTxAttempts = 20
	// pgConnectWait is how long a transaction waits for the database to
	// come back (a restart, a failover of PostgreSQL itself) before it
	// gives up.
	pgConnectWait = 30 * time.Second
	// pgStartWait bounds the first connection at start: an unreachable
	// database is a clear error, not a hang.
	pgStartWait = 15 * time.Second
	// migrationLock is the advisory lock replicas take to migrate one at
	// a time.
	migrationLock = 0x63756d75 // "cumu"
)

// OpenPostgres opens the PostgreSQL database at dsn (a postgres:// URL)
// and brings its schema up to date. It fails with a clear error when the
// database cannot be reached.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", Redact(dsn), err)
	}
	// A few connections per CPU: more only make PostgreSQL's backends
	// contend (64 on 2 CPUs tripled the submit p99 of 8).
	conns := max(8, 4*runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, pgStartWait)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot reach the PostgreSQL store at %s: %w", Redact(dsn), err)
	}
	s := &DB{engine: postgresEngine, db: db, ro: db}
	q := prepared{stmt: noStmt, plain: pgQuerier{db}, engine: postgresEngine}
	s.wq = q
	s.rq = q
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	s.wq = prepared{stmt: noStmt, plain: pgQuerier{db}, engine: postgresEngine, note: s.noteNow, watching: s.watched}
	return s, nil
}

// pgIsolation is the isolation of PostgreSQL transactions: snapshot
// isolation (REPEATABLE READ). Every transaction sees one snapshot, and of
// two that change the same row the second fails and is run again (it then
// sees the first's change): a node is never claimed twice, a job or
// resource update is never lost (their version checks see the latest).
// SERIALIZABLE would also abort transactions that merely read rows
// another inserts — every two concurrent submits — for no gain here: the
// writes that decide (assignments, scaling) come from the one leader.
const pgIsolation = sql.LevelRepeatableRead

// pgTx is Tx on PostgreSQL: a transaction at pgIsolation, run again when
// it conflicted with another or the connection broke before it committed.
func (s *DB) pgTx(ctx context.Context, fn func(q Querier) error) error {
	var err error
	deadline := time.Now().Add(pgConnectWait)
	for attempt := 1; ; attempt++ {
		var retry bool
		retry, err = s.pgTxOnce(ctx, fn)
		if !retry || attempt >= pgTxAttempts && !connLost(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		// Back off a little, more each time, with jitter so that two
		// conflicting transactions do not meet again.
		d := time.Duration(attempt*attempt) * time.Millisecond
		d = d/2 + rand.N(d/2+1)
		if connLost(err) {
			d = 250 * time.Millisecond
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// pgTxOnce runs one attempt; retry says whether running it again may
// succeed (it did not commit).
func (s *DB) pgTxOnce(ctx context.Context, fn func(q Querier) error) (retry bool, err error) {
	obs := s.observer()
	var changed []any
	if obs != nil {
		start := time.Now()
		defer func() {
			if retry {
				return
			}
			obs.TxDone(time.Since(start), err == nil)
			if err == nil {
				for _, c := range changed {
					tell(obs, c)
				}
			}
		}()
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: pgIsolation})
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("begin: %w", err)
	}
	q := prepared{stmt: noStmt, plain: pgQuerier{tx}, engine: postgresEngine}
	if obs != nil {
		q.note = func(c any) { changed = append(changed, c) }
	}
	if err := s.checkFence(ctx, q); err != nil {
		_ = tx.Rollback()
		return conflict(err), err
	}
	if err := fn(q); err != nil {
		_ = tx.Rollback()
		return conflict(err), err
	}
	if err := tx.Commit(); err != nil {
		// A commit that failed for a conflict did not commit. One that
		// lost its connection may have: do not run it again.
		return conflict(err), fmt.Errorf("commit: %w", err)
	}
	return false, nil
}

// conflict reports whether err is PostgreSQL refusing a transaction
// because of a concurrent one (serialization failure, deadlock): running
// it again will see the other's writes.
func conflict(err error) bool {
	if errors.Is(err, ErrConflict) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return false
}

// connLost reports whether err is a connection that could not be made or
// broke (the database restarts or is failing over).
func connLost(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}

// migratePostgres brings the schema up to date in one transaction under
// an advisory lock, so replicas starting together migrate one at a time.
func (s *DB) migratePostgres(ctx context.Context) error {
	err := s.Tx(ctx, func(q Querier) error {
		if _, err := q.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, migrationLock); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)`); err != nil {
			return err
		}
		var v int
		err := q.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := q.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if v > len(pgMigrations) {
			return fmt.Errorf("database schema version %d is newer than this binary knows (%d); upgrade cumulus", v, len(pgMigrations))
		}
		for i := v; i < len(pgMigrations); i++ {
			if err := execScript(ctx, q, pgMigrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		_, err = q.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(pgMigrations))
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
