package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The store runs on one of two SQL engines: embedded SQLite (a file in the
// data dir, one server process) or PostgreSQL (a server that several
// control plane replicas share). The functions of this package are the
// same for both; the differences live here, in postgres.go and in each
// engine's migrations.
type engine int

const (
	sqliteEngine engine = iota
	postgresEngine
)

func (e engine) String() string {
	if e == postgresEngine {
		return "postgres"
	}
	return "sqlite"
}

// IsPostgres reports whether spec names a PostgreSQL database
// (postgres:// or postgresql:// URL).
func IsPostgres(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

// Open opens the store spec names: a PostgreSQL URL, or "" for the SQLite
// file cumulus.db in dataDir (a path ending in .db is a SQLite file too).
func Open(ctx context.Context, spec, dataDir string) (*DB, error) {
	switch {
	case IsPostgres(spec):
		return OpenPostgres(ctx, spec)
	case spec == "":
		return OpenSQLite(ctx, filepath.Join(dataDir, "cumulus.db"))
	case strings.HasSuffix(spec, ".db"):
		return OpenSQLite(ctx, spec)
	}
	return nil, fmt.Errorf("store %q: give a postgres://… URL, a SQLite file ending in .db, or nothing for <data dir>/cumulus.db", Redact(spec))
}

// Redact hides the password of a store URL, for logs and errors.
func Redact(spec string) string {
	at := strings.LastIndex(spec, "@")
	scheme := strings.Index(spec, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return spec
	}
	cred := spec[scheme+3 : at]
	if i := strings.Index(cred, ":"); i >= 0 {
		return spec[:scheme+3] + cred[:i] + ":xxxxx" + spec[at:]
	}
	return spec
}

// Engine names the SQL engine the store runs on: "sqlite" or "postgres".
func (s *DB) Engine() string { return s.engine.String() }

// rebinds caches each query text rewritten for PostgreSQL.
var rebinds sync.Map // string → string

// rebind rewrites a query written with SQLite's "?" placeholders into
// PostgreSQL's "$1, $2, …". A "?" inside a quoted literal is left alone.
func rebind(query string) string {
	if v, ok := rebinds.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	rebinds.Store(query, out)
	return out
}

// pgQuerier runs queries written for SQLite on PostgreSQL: it rewrites
// their placeholders.
type pgQuerier struct{ q Querier }

func (p pgQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.q.ExecContext(ctx, rebind(query), args...)
}

func (p pgQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.q.QueryContext(ctx, rebind(query), args...)
}

func (p pgQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.q.QueryRowContext(ctx, rebind(query), args...)
}

// engineOf is the engine behind a Querier of this package.
func engineOf(q Querier) engine {
	switch q := q.(type) {
	case prepared:
		return q.engine
	case fencedWriter:
		return q.s.engine
	}
	return sqliteEngine
}

// noStmt runs every query unprepared (pgx prepares and caches statements
// on each connection itself).
func noStmt(context.Context, string) *sql.Stmt { return nil }
