package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Operation kinds: the API queues them, the operations controller runs them.
const (
	OpComputeCreate   = "compute.create"
	OpComputeDelete   = "compute.delete"
	OpWorkspaceDelete = "workspace.delete"
	OpJobCancel       = "job.cancel" // target "job:<uid>"
)

// Operation is a long-running operation: what it does (kind) to which
// resource (target, an ARM id) and how it stands.
type Operation struct {
	ID      string
	Kind    string // one of the Op* kinds
	Target  string
	Status  string // InProgress, Succeeded, Failed, Canceled
	Error   string // JSON of an api.Error when Failed
	Started time.Time
	Ended   time.Time
}

// InsertOperation records a new operation.
func InsertOperation(ctx context.Context, q Querier, op Operation) error {
	_, err := q.ExecContext(ctx, `INSERT INTO operations (id, kind, target, status, error, started) VALUES (?, ?, ?, ?, ?, ?)`,
		op.ID, op.Kind, Key(op.Target), op.Status, op.Error, op.Started.UnixMilli())
	if err != nil {
		return fmt.Errorf("insert operation: %w", err)
	}
	return nil
}

// GetOperation reads one operation.
func GetOperation(ctx context.Context, q Querier, id string) (Operation, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, kind, target, status, error, started, ended FROM operations WHERE id = ?`, id)
	if err != nil {
		return Operation{}, fmt.Errorf("get operation: %w", err)
	}
	ops, err := scanOperations(rows)
	if err != nil {
		return Operation{}, err
	}
	if len(ops) == 0 {
		return Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	return ops[0], nil
}

// PendingOperations lists the operations still in progress, oldest first.
func PendingOperations(ctx context.Context, q Querier) ([]Operation, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, kind, target, status, error, started, ended FROM operations WHERE status = 'InProgress' ORDER BY started, id`)
	if err != nil {
		return nil, fmt.Errorf("pending operations: %w", err)
	}
	return scanOperations(rows)
}

// PendingOperationFor returns the operation of a kind in progress on target, if any.
func PendingOperationFor(ctx context.Context, q Querier, target, kind string) (Operation, bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, kind, target, status, error, started, ended FROM operations WHERE status = 'InProgress' AND target = ? AND kind = ? LIMIT 1`, Key(target), kind)
	if err != nil {
		return Operation{}, false, fmt.Errorf("pending operation: %w", err)
	}
	ops, err := scanOperations(rows)
	if err != nil || len(ops) == 0 {
		return Operation{}, false, err
	}
	return ops[0], true, nil
}

// FinishOperation sets a final status, once: an operation already
// finished is left as it is.
func FinishOperation(ctx context.Context, q Querier, id, status, errJSON string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE operations SET status = ?, error = ?, ended = ? WHERE id = ? AND status = 'InProgress'`,
		status, errJSON, now.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("finish operation: %w", err)
	}
	return nil
}

// PruneOperations deletes finished operations that ended before cutoff.
func PruneOperations(ctx context.Context, q Querier, cutoff time.Time) error {
	_, err := q.ExecContext(ctx, `DELETE FROM operations WHERE status <> 'InProgress' AND ended < ?`, cutoff.UnixMilli())
	if err != nil {
		return fmt.Errorf("prune operations: %w", err)
	}
	return nil
}

func scanOperations(rows *sql.Rows) ([]Operation, error) {
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		var op Operation
		var started, ended int64
		if err := rows.Scan(&op.ID, &op.Kind, &op.Target, &op.Status, &op.Error, &started, &ended); err != nil {
			return nil, fmt.Errorf("scan operation: %w", err)
		}
		op.Started = time.UnixMilli(started).UTC()
		if ended > 0 {
			op.Ended = time.UnixMilli(ended).UTC()
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("scan operations: %w", err)
	}
	return out, nil
}
