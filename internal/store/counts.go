package store

import (
	"context"
	"fmt"
)

// StateCount is how many nodes (or jobs) of one compute are in one state.
type StateCount struct {
	Compute string // the compute's key (lower case ARM id)
	State   string // a node state or a job status
	N       int
}

// AllNodeCounts counts every compute's nodes by state, from the counts
// the store keeps (no scan of the nodes). The counts are summed: on
// PostgreSQL a count is several rows (see pgMigrations).
func AllNodeCounts(ctx context.Context, q Querier) ([]StateCount, error) {
	return counts(ctx, q, `SELECT compute, state, sum(n) FROM node_counts GROUP BY compute, state HAVING sum(n) > 0`)
}

// AllJobCounts counts every compute's jobs by status, from the counts the
// store keeps (no scan of the jobs).
func AllJobCounts(ctx context.Context, q Querier) ([]StateCount, error) {
	return counts(ctx, q, `SELECT compute, status, sum(n) FROM job_counts GROUP BY compute, status HAVING sum(n) > 0`)
}

func counts(ctx context.Context, q Querier, query string) ([]StateCount, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("counts: %w", err)
	}
	defer rows.Close()
	var out []StateCount
	for rows.Next() {
		var c StateCount
		if err := rows.Scan(&c.Compute, &c.State, &c.N); err != nil {
			return nil, fmt.Errorf("counts: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counts: %w", err)
	}
	return out, nil
}
