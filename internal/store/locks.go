package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Management locks (the locks table) are keyed by the id of the resource
// they lock, lower-cased, and their name. A lock goes with its resource:
// the table's trigger removes the locks of a workspace or compute, and of
// everything under it, when its row leaves the resources table.

// StoredLock is a lock with the scope it sits at and when it was made.
type StoredLock struct {
	Scope   string // the locked resource's id as first written
	Lock    api.Lock
	Created time.Time
}

// PutLock creates or replaces the lock named l.Name at scope; created
// says which. It must run in a transaction (Tx): on PostgreSQL it first
// takes the locks table in a mode that waits for every write transaction
// that checked locks (GuardLocks) to end, so that no such write commits
// against a snapshot without this lock.
func PutLock(ctx context.Context, q Querier, scope string, l api.Lock, now time.Time) (created bool, err error) {
	if own, err := inOwnTx(ctx, q, func(q Querier) (err error) { created, err = PutLock(ctx, q, scope, l, now); return err }); own {
		return created, err
	}
	if err := lockTable(ctx, q, "SHARE ROW EXCLUSIVE"); err != nil {
		return false, err
	}
	body, err := json.Marshal(l)
	if err != nil {
		return false, fmt.Errorf("encode lock: %w", err)
	}
	res, err := q.ExecContext(ctx, `UPDATE locks SET level = ?, body = ? WHERE scope = ? AND name = ?`,
		l.Properties.Level, string(body), Key(scope), Key(l.Name))
	if err != nil {
		return false, fmt.Errorf("put lock: %w", err)
	}
	wrote(q, locksOf, lockChange{id: allLocks}) // read again after the commit
	if n, _ := res.RowsAffected(); n > 0 {
		return false, nil
	}
	_, err = q.ExecContext(ctx, `INSERT INTO locks (scope, name, level, body, created) VALUES (?, ?, ?, ?, ?)`,
		Key(scope), Key(l.Name), l.Properties.Level, string(body), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("put lock: %w", err)
	}
	return true, nil
}

// GetLock reads the lock name at exactly scope; ErrNotFound when absent.
func GetLock(ctx context.Context, q Querier, scope, name string) (StoredLock, error) {
	var body string
	var created int64
	err := q.QueryRowContext(ctx, `SELECT body, created FROM locks WHERE scope = ? AND name = ?`, Key(scope), Key(name)).Scan(&body, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredLock{}, fmt.Errorf("lock %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return StoredLock{}, fmt.Errorf("get lock: %w", err)
	}
	return decodeLock(body, created)
}

// DeleteLock removes the lock name at scope; ErrNotFound when absent. It
// must run in a transaction, and waits for the write transactions that
// checked locks, as PutLock does.
func DeleteLock(ctx context.Context, q Querier, scope, name string) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return DeleteLock(ctx, q, scope, name) }); own {
		return err
	}
	if err := lockTable(ctx, q, "SHARE ROW EXCLUSIVE"); err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, `DELETE FROM locks WHERE scope = ? AND name = ?`, Key(scope), Key(name))
	if err != nil {
		return fmt.Errorf("delete lock: %w", err)
	}
	wrote(q, locksOf, lockChange{id: allLocks})
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("lock %s: %w", name, ErrNotFound)
	}
	return nil
}

// LocksAround lists, by scope (outermost first) and name, the locks at scope and at every
// resource above it (its workspace, for a compute) and, with below, the
// locks of resources under it too.
func LocksAround(ctx context.Context, q Querier, scope string, below bool) ([]StoredLock, error) {
	k := strings.TrimSuffix(Key(scope), "/")
	if v := viewOf(q, locksOf, allLocks); v != nil {
		rows, ok, err := heldLocks(ctx, q, v)
		if err != nil {
			return nil, err
		}
		if ok {
			return locksOfRows(rows, func(r lockRow) bool {
				return r.scope == k || strings.HasPrefix(k, r.scope+"/") || below && strings.HasPrefix(r.scope, k+"/")
			})
		}
	}
	query := `SELECT scope, name, body, created FROM locks WHERE scope = ? OR substr(CAST(? AS TEXT), 1, length(scope) + 1) = scope || '/'`
	args := []any{k, k}
	if below {
		query += ` OR substr(scope, 1, ?) = ?`
		args = append(args, len(k)+1, k+"/")
	}
	rows, err := lockRows(ctx, q, query+` ORDER BY scope, name`, args...)
	if err != nil {
		return nil, err
	}
	return locksOfRows(rows, nil)
}

// lockView holds every lock as this process last read them, under the one
// id allLocks (rowView; a write of a lock, or the removal of a workspace
// or compute, whose locks go with it, drops them, read again after its
// commit): every write request checks the locks around its target, and
// their read from SQL was a reader connection's fresh look into the WAL
// under a busy writer. More than maxViewedLocks are not held.
type lockView = rowView[[]lockRow]

type lockChange = rowChange[[]lockRow]

// allLocks is the id the view holds the locks under.
const allLocks = "locks"

// maxViewedLocks bounds the locks the view holds.
const maxViewedLocks = 1 << 10

// lockRow is a lock's row: its keys, stored document and creation.
type lockRow struct {
	scope, name, body string
	created           int64
}

func newLockView() *lockView {
	return newRowView(slices.Clone[[]lockRow], func(rows []lockRow) bool { return len(rows) <= maxViewedLocks }, 0)
}

// heldLocks returns every lock, by scope and name, from the view v or, when
// it holds none, from SQL (kept by the view). ok is false, with no rows,
// when there are more than the view holds.
func heldLocks(ctx context.Context, q Querier, v *lockView) (rows []lockRow, ok bool, err error) {
	rows, ok, from := v.held(allLocks)
	if ok {
		return rows, true, nil
	}
	rows, err = lockRows(ctx, q, `SELECT scope, name, body, created FROM locks ORDER BY scope, name LIMIT ?`, maxViewedLocks+1)
	if err != nil || len(rows) > maxViewedLocks {
		return nil, false, err
	}
	v.fill(allLocks, rows, from)
	return rows, true, nil
}

// lockRows runs a query of locks' rows.
func lockRows(ctx context.Context, q Querier, query string, args ...any) ([]lockRow, error) {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	defer rs.Close()
	var out []lockRow
	for rs.Next() {
		var r lockRow
		if err := rs.Scan(&r.scope, &r.name, &r.body, &r.created); err != nil {
			return nil, fmt.Errorf("list locks: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return out, nil
}

// locksOfRows decodes the rows that match (nil: all).
func locksOfRows(rows []lockRow, match func(lockRow) bool) ([]StoredLock, error) {
	var out []StoredLock
	for _, r := range rows {
		if match != nil && !match(r) {
			continue
		}
		l, err := decodeLock(r.body, r.created)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// GuardLocks is called by a write transaction before it reads the locks
// that may refuse it. On PostgreSQL it takes the locks table in SHARE
// mode: such writes run side by side, while a lock's creation or removal
// waits for them to end (and they for it), so a write never commits
// against a snapshot that misses a lock made meanwhile. SQLite runs one
// write transaction at a time already.
func GuardLocks(ctx context.Context, q Querier) error {
	return lockTable(ctx, q, "SHARE")
}

func lockTable(ctx context.Context, q Querier, mode string) error {
	if engineOf(q) != postgresEngine {
		return nil
	}
	if _, err := q.ExecContext(ctx, `LOCK TABLE locks IN `+mode+` MODE`); err != nil {
		return fmt.Errorf("lock table locks: %w", err)
	}
	return nil
}

func decodeLock(body string, created int64) (StoredLock, error) {
	var l StoredLock
	if err := json.Unmarshal([]byte(body), &l.Lock); err != nil {
		return l, fmt.Errorf("decode lock: %w", err)
	}
	l.Scope = lockScope(l.Lock.ID)
	l.Created = time.UnixMilli(created).UTC()
	return l, nil
}

// lockScope is the scope part of a lock's id.
func lockScope(id string) string {
	i := strings.LastIndex(strings.ToLower(id), "/providers/"+strings.ToLower(api.LockProvider)+"/locks/")
	if i < 0 {
		return id
	}
	return id[:i]
}
