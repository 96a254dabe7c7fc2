package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/cumulus-ml/cumulus/internal/batch"
	"time"
)

// ErrFenced is returned by a transaction of a fenced store whose lease
// another holder has taken: the caller is no longer the leader and must
// not act.
var ErrFenced = errors.New("lease lost: another replica leads")

// Lease is a named lease as the store records it. Token grows by one each
// time the lease changes hands: it fences out writes of an earlier holder.
type Lease struct {
	Name    string
	Holder  string
	Token   int64
	Expires time.Time
}

// Fence names the lease term a fenced store writes under.
type Fence struct {
	Lease  string
	Holder string
	Token  int64
}

// AcquireLease takes the lease for holder, or renews it when holder has it
// already, until now+ttl. It fails (ok false) while another holder's lease
// has not expired. A taken lease gets the next token; a renewed one keeps
// its token.
func (s *DB) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (l Lease, ok bool, err error) {
	err = s.Tx(ctx, func(q Querier) error {
		ok = false
		cur, err := getLease(ctx, q, name)
		switch {
		case errors.Is(err, ErrNotFound):
			l = Lease{Name: name, Holder: holder, Token: 1, Expires: now.Add(ttl)}
			_, err = q.ExecContext(ctx, `INSERT INTO leases (name, holder, token, expires) VALUES (?, ?, ?, ?)`,
				name, holder, l.Token, l.Expires.UnixMilli())
		case err != nil:
			return err
		case cur.Holder == holder && cur.Expires.After(now):
			l = cur
			l.Expires = now.Add(ttl)
			_, err = q.ExecContext(ctx, `UPDATE leases SET expires = ? WHERE name = ? AND token = ?`, l.Expires.UnixMilli(), name, cur.Token)
		case cur.Expires.After(now):
			l = cur
			return nil // another holder's lease runs
		default:
			l = Lease{Name: name, Holder: holder, Token: cur.Token + 1, Expires: now.Add(ttl)}
			_, err = q.ExecContext(ctx, `UPDATE leases SET holder = ?, token = ?, expires = ? WHERE name = ? AND token = ?`,
				holder, l.Token, l.Expires.UnixMilli(), name, cur.Token)
		}
		if err != nil {
			return fmt.Errorf("lease %s: %w", name, err)
		}
		ok = true
		return nil
	})
	return l, ok, err
}

// ReleaseLease gives up holder's lease at once (a clean shutdown), so
// another replica need not wait for it to expire.
func (s *DB) ReleaseLease(ctx context.Context, name, holder string, token int64) error {
	_, err := s.W().ExecContext(ctx, `UPDATE leases SET expires = 0 WHERE name = ? AND holder = ? AND token = ?`, name, holder, token)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// GetLease reads a lease (ErrNotFound before anyone took it).
func GetLease(ctx context.Context, q Querier, name string) (Lease, error) {
	return getLease(ctx, q, name)
}

func getLease(ctx context.Context, q Querier, name string) (Lease, error) {
	l := Lease{Name: name}
	var exp int64
	err := q.QueryRowContext(ctx, `SELECT holder, token, expires FROM leases WHERE name = ?`, name).Scan(&l.Holder, &l.Token, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return l, fmt.Errorf("lease %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("lease %s: %w", name, err)
	}
	l.Expires = time.UnixMilli(exp)
	return l, nil
}

// Fenced returns the store as seen by the holder of one lease term: each
// of its transactions first checks that the term still holds (the lease
// has this token) and fails with ErrFenced once another holder took it;
// on PostgreSQL it also locks the lease row for the transaction, so the
// lease cannot change hands while a fenced write is under way. A single
// write through W runs as such a transaction. Reads (Q) are not fenced.
// Close the original store, not this one.
func (s *DB) Fenced(f Fence) *DB {
	c := &DB{engine: s.engine, db: s.db, ro: s.ro, w: s.w, r: s.r, rq: s.rq, fence: &f, views: s.views, ckpt: s.ckpt,
		group: &batch.Group[*txCall]{Max: maxTxBatch}} // its own: a batch is written with its leader's fence
	c.obs.Store(s.obs.Load())
	c.wq = fencedWriter{c}
	return c
}

// checkFence fails with ErrFenced when the store is fenced and its lease
// term has ended.
func (s *DB) checkFence(ctx context.Context, q Querier) error {
	if s.fence == nil {
		return nil
	}
	query := `SELECT token FROM leases WHERE name = ? AND holder = ?`
	if s.engine == postgresEngine {
		query += ` FOR SHARE`
	}
	var token int64
	err := q.QueryRowContext(ctx, query, s.fence.Lease, s.fence.Holder).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) || err == nil && token != s.fence.Token {
		return ErrFenced
	}
	if err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	return nil
}

// fencedWriter runs each single write of a fenced store in a fenced
// transaction.
type fencedWriter struct{ s *DB }

func (f fencedWriter) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := f.s.Tx(ctx, func(q Querier) error {
		var err error
		res, err = q.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// QueryContext and QueryRowContext read (a single write statement with
// RETURNING is not used through W).
func (f fencedWriter) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return f.s.rq.QueryContext(ctx, query, args...)
}

func (f fencedWriter) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return f.s.rq.QueryRowContext(ctx, query, args...)
}

// Heartbeats records when agents were last heard from (node id → time),
// for the replica that runs the controllers when agents poll others.
// A time older than the recorded one is ignored.
func (s *DB) PutHeartbeats(ctx context.Context, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return nil
	}
	return s.Tx(ctx, func(q Querier) error {
		for node, t := range seen {
			_, err := q.ExecContext(ctx, `INSERT INTO heartbeats (node, seen) VALUES (?, ?)
				ON CONFLICT (node) DO UPDATE SET seen = excluded.seen WHERE heartbeats.seen < excluded.seen`, node, t.UnixMilli())
			if err != nil {
				return fmt.Errorf("heartbeats: %w", err)
			}
		}
		return nil
	})
}

// HeartbeatsSince reads the heartbeats recorded at or after since.
func (s *DB) HeartbeatsSince(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	rows, err := s.Q().QueryContext(ctx, `SELECT node, seen FROM heartbeats WHERE seen >= ?`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("heartbeats: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var node string
		var ms int64
		if err := rows.Scan(&node, &ms); err != nil {
			return nil, fmt.Errorf("heartbeats: %w", err)
		}
		out[node] = time.UnixMilli(ms)
	}
	return out, rows.Err()
}

// DeleteHeartbeatsBefore forgets heartbeats older than cutoff (nodes long
// gone).
func (s *DB) DeleteHeartbeatsBefore(ctx context.Context, cutoff time.Time) error {
	if _, err := s.W().ExecContext(ctx, `DELETE FROM heartbeats WHERE seen < ?`, cutoff.UnixMilli()); err != nil {
		return fmt.Errorf("heartbeats: %w", err)
	}
	return nil
}

// CompactCounts folds the rows of +1 and -1 that PostgreSQL's node and
// job counts accumulate into one row per compute and state. (SQLite keeps
// one row each already.) The replica that runs the controllers calls it
// now and then.
func (s *DB) CompactCounts(ctx context.Context) error {
	if s.engine != postgresEngine {
		return nil
	}
	for _, t := range []struct{ table, col string }{{"node_counts", "state"}, {"job_counts", "status"}} {
		err := s.Tx(ctx, func(q Querier) error {
			_, err := q.ExecContext(ctx, `WITH gone AS (DELETE FROM `+t.table+` RETURNING compute, `+t.col+`, n)
				INSERT INTO `+t.table+` SELECT compute, `+t.col+`, sum(n) FROM gone GROUP BY compute, `+t.col+` HAVING sum(n) != 0`)
			return err
		})
		if err != nil {
			return fmt.Errorf("compact %s: %w", t.table, err)
		}
	}
	return nil
}
