package store

import (
	"context"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Fair share reads a compute's queue by group, the jobs that hold its
// nodes, and each group's decayed usage; the columns are derived from the
// job's document whenever it is written (shareColumns).

// shareColumns are the fair-share columns of a job: its group, when its
// current attempt got its nodes (Unix ms, 0 when none runs) and its own
// minimum runtime (ms, 0: its compute's).
func shareColumns(j *Job) (group string, started, minRuntime int64) {
	p := &j.Doc.Properties
	if p.FairShareGroup != nil {
		group = *p.FairShareGroup
	}
	if k := len(p.Attempts); k > 0 && p.Attempts[k-1].Ended == nil && p.Attempts[k-1].Assigned != nil {
		started = p.Attempts[k-1].Assigned.UnixMilli()
	}
	return group, started, j.Doc.JobMinRuntime().Milliseconds()
}

// The reads of queued jobs by fair-share group, each from the index of
// queued jobs (jobs_share_queued).
const (
	groupQueueHead = `SELECT uid, name, seq, priority, nodes, image, quota_wait FROM jobs
		WHERE compute = ? AND ` + isQueued + ` AND share_group = ? ORDER BY priority DESC, seq LIMIT ?`
	queuedGroupsQuery = `WITH RECURSIVE g(grp) AS (
			SELECT min(share_group) FROM jobs WHERE compute = ? AND ` + isQueued + `
			UNION ALL
			SELECT (SELECT min(share_group) FROM jobs WHERE compute = ? AND ` + isQueued + ` AND share_group > g.grp) FROM g WHERE g.grp IS NOT NULL
		) SELECT grp FROM g WHERE grp IS NOT NULL`
	queuedByGroupQuery = `SELECT share_group, count(*), coalesce(sum(nodes), 0) FROM jobs
		WHERE compute = ? AND ` + isQueued + ` GROUP BY share_group`
)

// QueuedJobsByGroup lists the head of each fair-share group's queue on a
// compute, each in scheduling order (priority, highest first, then
// submission), at most limit jobs per group, from an index and columns
// only: a pass reads a few rows per group however long the queues are.
func QueuedJobsByGroup(ctx context.Context, q Querier, compute string, limit int) ([]QueuedJob, error) {
	groups, err := queuedGroups(ctx, q, compute)
	if err != nil {
		return nil, err
	}
	var out []QueuedJob
	for _, g := range groups {
		rows, err := q.QueryContext(ctx, groupQueueHead, Key(compute), g, limit)
		if err != nil {
			return nil, fmt.Errorf("queued jobs: %w", err)
		}
		for rows.Next() {
			j := QueuedJob{Group: g}
			if err := rows.Scan(&j.UID, &j.Name, &j.Seq, &j.Priority, &j.Nodes, &j.Image, &j.QuotaWait); err != nil {
				rows.Close()
				return nil, fmt.Errorf("queued jobs: %w", err)
			}
			out = append(out, j)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("queued jobs: %w", err)
		}
	}
	return out, nil
}

// queuedGroups lists the groups with queued jobs on a compute, one index
// seek per group (a skip scan written out, which both engines run).
func queuedGroups(ctx context.Context, q Querier, compute string) ([]string, error) {
	rows, err := q.QueryContext(ctx, queuedGroupsQuery, Key(compute), Key(compute))
	if err != nil {
		return nil, fmt.Errorf("queued groups: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("queued groups: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RunningJob is what the scheduler reads of a job that holds nodes.
type RunningJob struct {
	UID        string
	Name       string
	Group      string
	Priority   int
	Seq        int64
	Nodes      int
	Started    time.Time     // when its current attempt got its nodes; zero: long ago
	MinRuntime time.Duration // its own; 0: its compute's
}

// holding are the statuses of a job that holds nodes.
var holding = []string{api.JobPreparing, api.JobStarting, api.JobRunning, api.JobFinalizing, api.JobCancelRequested}

// RunningJobs lists the jobs that hold a compute's nodes, from columns
// only.
func RunningJobs(ctx context.Context, q Querier, compute string) ([]RunningJob, error) {
	args := []any{Key(compute)}
	for _, s := range holding {
		args = append(args, s)
	}
	rows, err := q.QueryContext(ctx, `SELECT uid, name, share_group, priority, seq, nodes, started, min_runtime FROM jobs
		WHERE compute = ? AND status IN (`+placeholders(len(holding))+`) ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("running jobs: %w", err)
	}
	defer rows.Close()
	var out []RunningJob
	for rows.Next() {
		var j RunningJob
		var started, minRuntime int64
		if err := rows.Scan(&j.UID, &j.Name, &j.Group, &j.Priority, &j.Seq, &j.Nodes, &started, &minRuntime); err != nil {
			return nil, fmt.Errorf("running jobs: %w", err)
		}
		if started > 0 {
			j.Started = time.UnixMilli(started).UTC()
		}
		j.MinRuntime = time.Duration(minRuntime) * time.Millisecond
		out = append(out, j)
	}
	return out, rows.Err()
}

// GroupQueue is how many jobs of a fair-share group are queued on a
// compute, and the nodes they need.
type GroupQueue struct {
	Jobs, Nodes int
}

// QueuedByGroup counts a compute's queued jobs by fair-share group.
func QueuedByGroup(ctx context.Context, q Querier, compute string) (map[string]GroupQueue, error) {
	rows, err := q.QueryContext(ctx, queuedByGroupQuery, Key(compute))
	if err != nil {
		return nil, fmt.Errorf("queued by group: %w", err)
	}
	defer rows.Close()
	out := map[string]GroupQueue{}
	for rows.Next() {
		var g string
		var n GroupQueue
		if err := rows.Scan(&g, &n.Jobs, &n.Nodes); err != nil {
			return nil, fmt.Errorf("queued by group: %w", err)
		}
		out[g] = n
	}
	return out, rows.Err()
}

// ShareUsage is a fair-share group's decayed usage of a compute: Value
// node-seconds as of At, and the nodes the group has held since (see
// decide.Usage, which holds the decay).
type ShareUsage struct {
	Value float64
	At    time.Time
	Held  int
}

// ShareUsages reads the usage of every group of a compute, by group.
func ShareUsages(ctx context.Context, q Querier, compute string) (map[string]ShareUsage, error) {
	rows, err := q.QueryContext(ctx, `SELECT grp, value, at, held FROM share_usage WHERE compute = ?`, Key(compute))
	if err != nil {
		return nil, fmt.Errorf("share usage: %w", err)
	}
	defer rows.Close()
	out := map[string]ShareUsage{}
	for rows.Next() {
		var g string
		var u ShareUsage
		var at int64
		if err := rows.Scan(&g, &u.Value, &at, &u.Held); err != nil {
			return nil, fmt.Errorf("share usage: %w", err)
		}
		u.At = time.UnixMilli(at).UTC()
		out[g] = u
	}
	return out, rows.Err()
}

// PutShareUsage records a group's usage of a compute.
func PutShareUsage(ctx context.Context, q Querier, compute, group string, u ShareUsage) error {
	_, err := q.ExecContext(ctx, `INSERT INTO share_usage (compute, grp, value, at, held) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (compute, grp) DO UPDATE SET value = excluded.value, at = excluded.at, held = excluded.held`,
		Key(compute), group, u.Value, u.At.UnixMilli(), u.Held)
	if err != nil {
		return fmt.Errorf("put share usage: %w", err)
	}
	return nil
}

// DeleteShareUsage forgets a compute's usage (the compute is deleted, or
// its groups changed).
func DeleteShareUsage(ctx context.Context, q Querier, compute string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM share_usage WHERE compute = ?`, Key(compute)); err != nil {
		return fmt.Errorf("delete share usage: %w", err)
	}
	return nil
}

// JobsToRegroup lists a compute's jobs that are not finished (queued or
// holding nodes), documents included, for a change of its grouping.
func JobsToRegroup(ctx context.Context, q Querier, compute string) ([]Job, error) {
	return JobsByStatus(ctx, q, compute, append([]string{api.JobQueued}, holding...)...)
}
