package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The cost ledger: what was billed and who used it. A node is billed from
// its request (its record written) to its removal (its record deleted); a
// job's attempt holds its nodes from its assignment to its end. Both are
// kept after the node and the job are gone, so a cost report covers any
// past period.

// NodeBill is one node's life in the ledger.
type NodeBill struct {
	Node     string
	Compute  string // compute key
	VMSize   string
	Priority string
	Created  time.Time
	Removed  time.Time // zero while it lives
}

// JobRun is one attempt of a job on its nodes, in the ledger.
type JobRun struct {
	Job     string // uid
	Attempt int
	Name    string
	Compute string // compute key
	Nodes   []string
	Started time.Time // assigned its nodes
	Ended   time.Time // zero while it runs
}

// ledgerNode records a new node.
func ledgerNode(ctx context.Context, q Querier, n Node) error {
	_, err := q.ExecContext(ctx, `INSERT INTO node_ledger (node, compute, vm_size, priority, created) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node) DO NOTHING`, n.ID, Key(n.Compute), n.VMSize, n.Priority, n.Created.UnixMilli())
	if err != nil {
		return fmt.Errorf("ledger node %s: %w", n.ID, err)
	}
	return nil
}

// ledgerRemoved closes a node's life.
func ledgerRemoved(ctx context.Context, q Querier, id string, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE node_ledger SET removed = ? WHERE node = ? AND removed IS NULL`, at.UnixMilli(), id); err != nil {
		return fmt.Errorf("ledger node %s: %w", id, err)
	}
	return nil
}

// runMark is what the ledger holds of a job's latest attempt, so that a
// write changes the ledger only when the attempt starts or ends. It is
// taken of every job read: a comparable value, no allocation.
type runMark struct {
	attempt        int
	started, ended int64 // Unix milliseconds
}

func markOf(j *Job) runMark {
	r, ok := latestRun(j)
	if !ok {
		return runMark{}
	}
	return runMark{r.Attempt, r.Started.UnixMilli(), r.Ended.UnixMilli()}
}

// latestRun is the job's latest attempt as a ledger row. An attempt of a
// job that ended without its attempt's end (deleted compute, cancel before
// start) ends with the job.
func latestRun(j *Job) (JobRun, bool) {
	p := &j.Doc.Properties
	if len(p.Attempts) == 0 {
		return JobRun{}, false
	}
	a := p.Attempts[len(p.Attempts)-1]
	start := a.Assigned
	if start == nil {
		start = a.Started
	}
	if start == nil {
		return JobRun{}, false
	}
	r := JobRun{Job: j.UID, Attempt: a.Number, Name: j.Doc.Name, Compute: Key(j.Compute), Nodes: a.Nodes, Started: *start}
	switch {
	case a.Ended != nil:
		r.Ended = *a.Ended
	case api.JobTerminal(p.Status) && p.EndTime != nil:
		r.Ended = *p.EndTime
	case p.Status == api.JobQueued && len(p.History) > 0:
		r.Ended = p.History[len(p.History)-1].Time // requeued without an end recorded
	}
	return r, true
}

// ledgerRun writes the job's latest attempt if it changed since it was read.
func ledgerRun(ctx context.Context, q Querier, j *Job) error {
	mark := markOf(j)
	if mark == j.ran {
		return nil
	}
	r, _ := latestRun(j)
	nodes, err := json.Marshal(r.Nodes)
	if err != nil {
		return fmt.Errorf("ledger run: %w", err)
	}
	var ended any
	if !r.Ended.IsZero() {
		ended = r.Ended.UnixMilli()
	}
	_, err = q.ExecContext(ctx, `INSERT INTO job_runs (job, attempt, name, compute, nodes, started, ended) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, attempt) DO UPDATE SET nodes = excluded.nodes, started = excluded.started, ended = excluded.ended`,
		r.Job, r.Attempt, r.Name, r.Compute, string(nodes), r.Started.UnixMilli(), ended)
	if err != nil {
		return fmt.Errorf("ledger run of job %s: %w", j.Doc.Name, err)
	}
	j.ran = mark
	return nil
}

// NodeBills lists the nodes billed at some time in [since, until).
func NodeBills(ctx context.Context, q Querier, since, until time.Time) ([]NodeBill, error) {
	rows, err := q.QueryContext(ctx, `SELECT node, compute, vm_size, priority, created, removed FROM node_ledger
		WHERE created < ? AND (removed IS NULL OR removed > ?) ORDER BY created, node`, until.UnixMilli(), since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read node ledger: %w", err)
	}
	defer rows.Close()
	var out []NodeBill
	for rows.Next() {
		var b NodeBill
		var created int64
		var removed sql.NullInt64
		if err := rows.Scan(&b.Node, &b.Compute, &b.VMSize, &b.Priority, &created, &removed); err != nil {
			return nil, fmt.Errorf("read node ledger: %w", err)
		}
		b.Created = time.UnixMilli(created).UTC()
		if removed.Valid {
			b.Removed = time.UnixMilli(removed.Int64).UTC()
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// JobRuns lists the attempts that held nodes at some time in [since, until).
func JobRuns(ctx context.Context, q Querier, since, until time.Time) ([]JobRun, error) {
	rows, err := q.QueryContext(ctx, `SELECT job, attempt, name, compute, nodes, started, ended FROM job_runs
		WHERE started < ? AND (ended IS NULL OR ended > ?) ORDER BY started, job, attempt`, until.UnixMilli(), since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read job runs: %w", err)
	}
	defer rows.Close()
	var out []JobRun
	for rows.Next() {
		var r JobRun
		var nodes string
		var started int64
		var ended sql.NullInt64
		if err := rows.Scan(&r.Job, &r.Attempt, &r.Name, &r.Compute, &nodes, &started, &ended); err != nil {
			return nil, fmt.Errorf("read job runs: %w", err)
		}
		if err := json.Unmarshal([]byte(nodes), &r.Nodes); err != nil {
			return nil, fmt.Errorf("decode job run %s/%d: %w", r.Job, r.Attempt, err)
		}
		r.Started = time.UnixMilli(started).UTC()
		if ended.Valid {
			r.Ended = time.UnixMilli(ended.Int64).UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
