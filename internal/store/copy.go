package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
)

// copied are the tables Copy moves, in an order that keeps references
// valid, with their columns. The counts (node_counts, job_counts) are not
// copied: the destination's triggers count the rows as they arrive.
// Leases and heartbeats belong to running replicas and start afresh, and
// utilization samples are short-lived. TestCopyTakesEveryColumn checks
// these lists against both engines' schemas: every column of a copied
// table is named, every other table is left behind on purpose.
var copied = []struct {
	table string
	cols  []string
}{
	{"resources", []string{"kind", "parent", "name", "version", "body", "created"}},
	{"operations", []string{"id", "kind", "target", "status", "error", "started", "ended"}},
	{"principals", []string{"name", "kind", "created"}},
	{"tokens", []string{"id", "name", "hash", "role", "created", "expires", "revoked"}},
	{"role_assignments", []string{"id", "principal", "role", "scope", "created"}},
	{"secrets", []string{"id", "sealed"}},
	{"nodes", []string{"id", "compute", "state", "job", "body", "created"}},
	{"jobs", []string{"uid", "parent", "name", "compute", "status", "seq", "version", "body", "created", "priority", "nodes", "image", "quota_wait",
		"share_group", "started", "min_runtime"}},
	{"audit", []string{"seq", "time", "principal", "operation", "resource", "status"}},
	{"blob_owners", []string{"digest", "workspace", "size", "uploaded", "principal"}},
	{"blob_paths", []string{"workspace", "container", "path", "digest", "size", "md5", "content_type", "metadata", "created", "modified", "etag"}},
	{"blob_blocks", []string{"workspace", "container", "path", "block", "digest", "size", "created"}},
	{"events", []string{"seq", "time", "compute", "node", "type", "body"}},
	{"node_ledger", []string{"node", "compute", "vm_size", "priority", "created", "removed"}},
	{"job_runs", []string{"job", "attempt", "name", "compute", "nodes", "started", "ended"}},
	{"locks", []string{"scope", "name", "level", "body", "created"}},
	{"job_metrics", []string{"job", "name", "step", "time", "value"}},
	{"job_params", []string{"job", "kind", "name", "value"}},
	{"parallel_batches", []string{"job", "idx", "state", "tries", "retries", "node", "attempt", "lease", "items", "failed_items", "rows", "error", "item_names", "ended"}},
	{"share_usage", []string{"compute", "grp", "value", "at", "held"}},
}

// ErrNotEmpty: the destination of a copy already holds state.
var ErrNotEmpty = errors.New("the destination store is not empty")

// CopyReport says how many rows of each table a copy moved.
type CopyReport map[string]int

// Copy copies every resource, operation, principal, token, role
// assignment, secret, node, job, audit entry, blob ownership, event, lock
// and fair-share usage of src
// into dst, which must be empty (ErrNotEmpty otherwise). It reads src in
// one read transaction (a consistent snapshot even while a server writes,
// though writes after it are not copied: stop the server first) and
// writes dst in one transaction: a failed copy leaves dst empty.
func Copy(ctx context.Context, src, dst *DB) (CopyReport, error) {
	rtx, err := src.ro.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("copy: read %s: %w", src.Engine(), err)
	}
	defer rtx.Rollback() //nolint:errcheck // read only
	rq := Querier(rtx)
	if src.engine == postgresEngine {
		rq = pgQuerier{rtx}
	}
	report := CopyReport{}
	err = dst.Tx(ctx, func(wq Querier) error {
		clear(report)
		for _, t := range copied {
			var n int
			if err := wq.QueryRowContext(ctx, `SELECT count(*) FROM `+t.table).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: its %s table has %d rows", ErrNotEmpty, t.table, n)
			}
		}
		for _, t := range copied {
			n, err := copyTable(ctx, rq, wq, t.table, t.cols, dst.engine)
			if err != nil {
				return fmt.Errorf("%s: %w", t.table, err)
			}
			report[t.table] = n
		}
		if dst.engine == postgresEngine {
			// The numbers handed out next follow the copied ones.
			for _, q := range []string{
				`SELECT setval('jobs_seq_source', greatest((SELECT max(seq) FROM jobs), 1))`,
				`SELECT setval(pg_get_serial_sequence('audit', 'seq'), greatest((SELECT max(seq) FROM audit), 1))`,
				`SELECT setval(pg_get_serial_sequence('events', 'seq'), greatest((SELECT max(seq) FROM events), 1))`,
			} {
				if _, err := wq.ExecContext(ctx, q); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	return report, nil
}

func copyTable(ctx context.Context, rq, wq Querier, table string, cols []string, to engine) (int, error) {
	rows, err := rq.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	insert := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES (` + placeholders(len(cols)) + `)`
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, c := range cols {
			vals[i] = convert(vals[i], c, to)
		}
		if _, err := wq.ExecContext(ctx, insert, vals...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// convert adapts a value read from one engine to the other's column:
// SQLite keeps quota_wait as 0 or 1 where PostgreSQL has a boolean, and
// may hand text back as bytes.
func convert(v any, col string, to engine) any {
	switch x := v.(type) {
	case []byte:
		if col != "sealed" {
			return string(x)
		}
	case int64:
		if col == "quota_wait" && to == postgresEngine {
			return x != 0
		}
	case bool:
		if to == sqliteEngine {
			if x {
				return int64(1)
			}
			return int64(0)
		}
	}
	return v
}

// Backup writes a consistent copy of a SQLite store to path, while it
// serves (VACUUM INTO). PostgreSQL stores are backed up with pg_dump.
func (s *DB) Backup(ctx context.Context, path string) error {
	if s.engine != sqliteEngine {
		return errors.New("backup: this store is PostgreSQL: back it up with pg_dump")
	}
	// Made first, empty and the owner's alone: the copy holds token
	// hashes and sealed secrets.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f.Close()
	if _, err := s.ro.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
