package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/pgtest"
)

// notCopied are the tables Copy leaves behind on purpose, each with why. A
// table in neither copied nor here fails TestCopyTakesEveryColumn: a new
// table must be copied or named here.
var notCopied = map[string]string{
	"schema_version": "each engine counts its own migrations",
	"node_counts":    "the destination's triggers count the nodes as they arrive",
	"job_counts":     "the destination's triggers count the jobs as they arrive",
	"leases":         "leases belong to running replicas and start afresh",
	"heartbeats":     "heartbeats belong to running agents and start afresh",
	"usage_samples":  "utilization samples live for the usage retention; the agents send fresh ones",
	"usage_latest":   "each node's latest sample comes with its next report",
}

// column is one column as an engine's catalogue describes it: its type
// class (integer, real, text, bytes) and whether it may hold NULL.
type column struct {
	class   string
	notNull bool
}

func (c column) String() string {
	if c.notNull {
		return c.class + " NOT NULL"
	}
	return c.class
}

// schema is table → column → description, as the engine reports it.
type schema map[string]map[string]column

// sqliteSchema reads the tables of a migrated SQLite store from
// sqlite_master and pragma table_info. A primary key column counts as NOT
// NULL, as it is on PostgreSQL (SQLite lets a TEXT key hold NULL only by an
// old quirk, and the store never writes one).
func sqliteSchema(ctx context.Context, db *DB) (schema, error) {
	rows, err := db.Q().QueryContext(ctx, `SELECT m.name, p.name, p.type, p."notnull", p.pk
		FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := schema{}
	for rows.Next() {
		var table, name, typ string
		var notNull bool
		var pk int
		if err := rows.Scan(&table, &name, &typ, &notNull, &pk); err != nil {
			return nil, err
		}
		class := map[string]string{"INTEGER": "integer", "REAL": "real", "TEXT": "text", "BLOB": "bytes"}[strings.ToUpper(typ)]
		if class == "" {
			return nil, fmt.Errorf("%s.%s: SQLite type %q has no class here", table, name, typ)
		}
		add(out, table, name, column{class, notNull || pk > 0})
	}
	return out, rows.Err()
}

// postgresSchema reads the tables of a migrated PostgreSQL store from
// information_schema. A boolean is of the integer class: SQLite keeps it
// as 0 or 1.
func postgresSchema(ctx context.Context, db *DB) (schema, error) {
	rows, err := db.Q().QueryContext(ctx, `SELECT c.table_name, c.column_name, c.data_type, c.is_nullable
		FROM information_schema.columns c JOIN information_schema.tables t
			ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := schema{}
	for rows.Next() {
		var table, name, typ, nullable string
		if err := rows.Scan(&table, &name, &typ, &nullable); err != nil {
			return nil, err
		}
		class := map[string]string{"bigint": "integer", "integer": "integer", "smallint": "integer", "boolean": "integer",
			"double precision": "real", "real": "real", "text": "text", "bytea": "bytes"}[typ]
		if class == "" {
			return nil, fmt.Errorf("%s.%s: PostgreSQL type %q has no class here", table, name, typ)
		}
		add(out, table, name, column{class, nullable == "NO"})
	}
	return out, rows.Err()
}

func add(s schema, table, name string, c column) {
	if s[table] == nil {
		s[table] = map[string]column{}
	}
	s[table][name] = c
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// migratedSchemas opens a fresh store on each engine, which migrates it,
// and reads back what the migrations made.
func migratedSchemas(t *testing.T) (lite, pg schema) {
	t.Helper()
	ctx := context.Background()
	ldb, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ldb.Close()
	if lite, err = sqliteSchema(ctx, ldb); err != nil {
		t.Fatal(err)
	}
	pdb, err := OpenPostgres(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	if pg, err = postgresSchema(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	return lite, pg
}

// TestSchemasAgree: the two hand-kept migration lists (schema.go,
// schema_postgres.go) end in the same tables with the same columns, of the
// same kind and nullability. A column added on one engine only fails here,
// not in production on the other.
func TestSchemasAgree(t *testing.T) {
	lite, pg := migratedSchemas(t)
	if len(lite) == 0 || len(pg) == 0 {
		t.Fatalf("read %d SQLite and %d PostgreSQL tables; want the store's", len(lite), len(pg))
	}
	for _, table := range sortedKeys(lite) {
		if pg[table] == nil {
			t.Errorf("table %s is on SQLite only: add it to schema_postgres.go", table)
		}
	}
	for _, table := range sortedKeys(pg) {
		lc, ok := lite[table]
		if !ok {
			t.Errorf("table %s is on PostgreSQL only: add it to schema.go", table)
			continue
		}
		pc := pg[table]
		for _, col := range sortedKeys(lc) {
			if _, ok := pc[col]; !ok {
				t.Errorf("column %s.%s is on SQLite only: add it to schema_postgres.go", table, col)
			}
		}
		for _, col := range sortedKeys(pc) {
			l, ok := lc[col]
			if !ok {
				t.Errorf("column %s.%s is on PostgreSQL only: add it to schema.go", table, col)
				continue
			}
			if p := pc[col]; l != p {
				t.Errorf("column %s.%s is %s on SQLite but %s on PostgreSQL", table, col, l, p)
			}
		}
	}
}

// TestCopyTakesEveryColumn: Copy's column lists (copy.go) name every column
// of the tables it copies, once, on both engines, and every other table is
// left behind on purpose (notCopied). A column added by a migration but
// not to the copy would be lost by `cumulus store migrate`.
func TestCopyTakesEveryColumn(t *testing.T) {
	lite, pg := migratedSchemas(t)
	seen := map[string]bool{}
	for _, c := range copied {
		if seen[c.table] {
			t.Errorf("copy.go lists table %s twice", c.table)
		}
		seen[c.table] = true
		if why, ok := notCopied[c.table]; ok {
			t.Errorf("table %s is copied but also listed as not copied (%s)", c.table, why)
		}
		for engine, s := range map[string]schema{"SQLite": lite, "PostgreSQL": pg} {
			cols, ok := s[c.table]
			if !ok {
				t.Errorf("copy.go copies table %s, which %s does not have", c.table, engine)
				continue
			}
			for _, col := range sortedKeys(cols) {
				if !slices.Contains(c.cols, col) {
					t.Errorf("copy.go leaves out column %s.%s (on %s)", c.table, col, engine)
				}
			}
			for i, col := range c.cols {
				if _, ok := cols[col]; !ok {
					t.Errorf("copy.go copies column %s.%s, which %s does not have", c.table, col, engine)
				}
				if slices.Contains(c.cols[:i], col) {
					t.Errorf("copy.go lists column %s.%s twice", c.table, col)
				}
			}
		}
	}
	for _, table := range sortedKeys(lite) {
		if !seen[table] && notCopied[table] == "" {
			t.Errorf("table %s is neither copied (copy.go) nor left behind with a reason (notCopied)", table)
		}
	}
	for _, table := range sortedKeys(notCopied) {
		if lite[table] == nil {
			t.Errorf("notCopied names table %s, which the store does not have", table)
		}
	}
}
