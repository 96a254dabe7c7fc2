package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/parallel"
)

// A parallel step's mini-batches, a row each (see package parallel): the
// nodes plan them (the same split on every node), the server hands them
// out one by one and records each one's end with the rows it returned, in
// the same transaction, so a mini-batch's rows are kept exactly once
// however often it ran.

// Mini-batch states.
const (
	BatchPending = "pending"
	BatchRunning = "running"
	BatchDone    = "done"
	BatchFailed  = "failed"
)

// Batch is one mini-batch of a parallel step.
type Batch struct {
	Job   string // the step's job uid
	Idx   int
	State string
	// Tries counts hand-outs; Retries those after a failure or timeout.
	Tries, Retries int
	Node           string // the node running it (running)
	Attempt        int    // the job attempt it was handed out in
	Lease          time.Time
	Items          int // items it holds (files or rows)
	FailedItems    int // items it returned no row for, or all when it failed
	Rows           string
	Error          string
	ItemNames      []string // a failed mini-batch's items, for its summary
	Ended          time.Time
}

// PlanBatches records a step's mini-batches, pending, with the number of
// items of each. It writes nothing when the step has some already.
func PlanBatches(ctx context.Context, q Querier, job string, items []int) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM parallel_batches WHERE job = ?`, job).Scan(&n); err != nil {
		return fmt.Errorf("plan mini-batches: %w", err)
	}
	if n > 0 {
		return nil
	}
	for i, c := range items {
		if _, err := q.ExecContext(ctx, `INSERT INTO parallel_batches (job, idx, state, tries, retries, node, attempt, lease, items, failed_items, rows, error, item_names, ended)
			VALUES (?, ?, ?, 0, 0, '', 0, 0, ?, 0, '', '', '', 0)`, job, i, BatchPending, c); err != nil {
			return fmt.Errorf("plan mini-batches: %w", err)
		}
	}
	return nil
}

// BatchCounts counts a step's mini-batches by state, their retries and
// their items.
func BatchCounts(ctx context.Context, q Querier, job string) (parallel.Counts, error) {
	var c parallel.Counts
	rows, err := q.QueryContext(ctx, `SELECT state, count(*), coalesce(sum(retries), 0), coalesce(sum(items), 0), coalesce(sum(failed_items), 0)
		FROM parallel_batches WHERE job = ? GROUP BY state`, job)
	if err != nil {
		return c, fmt.Errorf("mini-batch counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n, retries, items, failed int
		if err := rows.Scan(&state, &n, &retries, &items, &failed); err != nil {
			return c, fmt.Errorf("mini-batch counts: %w", err)
		}
		c.Total += n
		c.Retried += retries
		c.Items += items
		c.FailedItems += failed
		switch state {
		case BatchPending:
			c.Pending = n
		case BatchRunning:
			c.Running = n
		case BatchDone:
			c.Done = n
		case BatchFailed:
			c.Failed = n
		}
	}
	return c, rows.Err()
}

// LeaseBatches hands up to n pending mini-batches (lowest first) to a
// node's attempt until lease; it returns them as leased.
func LeaseBatches(ctx context.Context, q Querier, job, node string, attempt, n int, lease time.Time) ([]Batch, error) {
	if n <= 0 {
		return nil, nil
	}
	pending, err := queryBatches(ctx, q, `WHERE job = ? AND state = ? ORDER BY idx LIMIT ?`, job, BatchPending, n)
	if err != nil {
		return nil, err
	}
	for i := range pending {
		b := &pending[i]
		b.State, b.Node, b.Attempt, b.Lease, b.Tries = BatchRunning, node, attempt, lease, b.Tries+1
		if err := PutBatch(ctx, q, *b); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// GetBatch reads one mini-batch; ErrNotFound when the step has no such one.
func GetBatch(ctx context.Context, q Querier, job string, idx int) (Batch, error) {
	bs, err := queryBatches(ctx, q, `WHERE job = ? AND idx = ?`, job, idx)
	if err != nil {
		return Batch{}, err
	}
	if len(bs) == 0 {
		return Batch{}, fmt.Errorf("mini-batch %d: %w", idx, ErrNotFound)
	}
	return bs[0], nil
}

// PutBatch writes a mini-batch's state.
func PutBatch(ctx context.Context, q Querier, b Batch) error {
	names := ""
	if len(b.ItemNames) > 0 {
		raw, err := json.Marshal(b.ItemNames)
		if err != nil {
			return fmt.Errorf("put mini-batch: %w", err)
		}
		names = string(raw)
	}
	var ended int64
	if !b.Ended.IsZero() {
		ended = b.Ended.UnixMilli()
	}
	_, err := q.ExecContext(ctx, `UPDATE parallel_batches SET state = ?, tries = ?, retries = ?, node = ?, attempt = ?, lease = ?,
		failed_items = ?, rows = ?, error = ?, item_names = ?, ended = ? WHERE job = ? AND idx = ?`,
		b.State, b.Tries, b.Retries, b.Node, b.Attempt, b.Lease.UnixMilli(), b.FailedItems, b.Rows, b.Error, names, ended, b.Job, b.Idx)
	if err != nil {
		return fmt.Errorf("put mini-batch: %w", err)
	}
	return nil
}

// ExpiredBatches lists the running mini-batches whose lease ended before now.
func ExpiredBatches(ctx context.Context, q Querier, job string, now time.Time) ([]Batch, error) {
	return queryBatches(ctx, q, `WHERE job = ? AND state = ? AND lease < ? ORDER BY idx`, job, BatchRunning, now.UnixMilli())
}

// NodeBatches lists the mini-batches a node is running for a step.
func NodeBatches(ctx context.Context, q Querier, job, node string) ([]Batch, error) {
	return queryBatches(ctx, q, `WHERE job = ? AND state = ? AND node = ? ORDER BY idx`, job, BatchRunning, node)
}

// FailedBatches lists a step's failed mini-batches, at most limit.
func FailedBatches(ctx context.Context, q Querier, job string, limit int) ([]Batch, error) {
	return queryBatches(ctx, q, `WHERE job = ? AND state = ? ORDER BY idx LIMIT ?`, job, BatchFailed, limit)
}

// BatchRows calls f with the rows of each done mini-batch, in order.
func BatchRows(ctx context.Context, q Querier, job string, f func(rows string) error) error {
	rs, err := q.QueryContext(ctx, `SELECT rows FROM parallel_batches WHERE job = ? AND state = ? ORDER BY idx`, job, BatchDone)
	if err != nil {
		return fmt.Errorf("mini-batch rows: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var r string
		if err := rs.Scan(&r); err != nil {
			return fmt.Errorf("mini-batch rows: %w", err)
		}
		if err := f(r); err != nil {
			return err
		}
	}
	return rs.Err()
}

func queryBatches(ctx context.Context, q Querier, where string, args ...any) ([]Batch, error) {
	rows, err := q.QueryContext(ctx, `SELECT job, idx, state, tries, retries, node, attempt, lease, items, failed_items, rows, error, item_names, ended
		FROM parallel_batches `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("mini-batches: %w", err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		var b Batch
		var lease, ended int64
		var names string
		if err := rows.Scan(&b.Job, &b.Idx, &b.State, &b.Tries, &b.Retries, &b.Node, &b.Attempt, &lease, &b.Items, &b.FailedItems,
			&b.Rows, &b.Error, &names, &ended); err != nil {
			return nil, fmt.Errorf("mini-batches: %w", err)
		}
		b.Lease = time.UnixMilli(lease).UTC()
		if ended > 0 {
			b.Ended = time.UnixMilli(ended).UTC()
		}
		if names != "" {
			if err := json.Unmarshal([]byte(names), &b.ItemNames); err != nil {
				return nil, fmt.Errorf("mini-batch %d items: %w", b.Idx, err)
			}
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return out, nil
}

// ActiveParallelJobs lists the parallel steps (job uids) that have
// mini-batches not yet ended.
func ActiveParallelJobs(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT job FROM parallel_batches WHERE state IN (?, ?) ORDER BY job`, BatchPending, BatchRunning)
	if err != nil {
		return nil, fmt.Errorf("active parallel steps: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			return nil, fmt.Errorf("active parallel steps: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// FailedBatchStats counts a step's failed mini-batches and their items
// (a range of the state index: no scan of the others).
func FailedBatchStats(ctx context.Context, q Querier, job string) (n, items int, err error) {
	err = q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(failed_items), 0) FROM parallel_batches WHERE job = ? AND state = ?`,
		job, BatchFailed).Scan(&n, &items)
	if err != nil {
		return 0, 0, fmt.Errorf("failed mini-batches: %w", err)
	}
	return n, items, nil
}

// BatchesOpen reports whether a step has a mini-batch not yet ended.
func BatchesOpen(ctx context.Context, q Querier, job string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM parallel_batches WHERE job = ? AND state IN (?, ?) LIMIT 1) AS o`,
		job, BatchPending, BatchRunning).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("open mini-batches: %w", err)
	}
	return n > 0, nil
}
