package store

import (
	"context"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// UsageRow is one utilization sample as stored: a node's (Job "") or one
// job's on that node. Body is the sample's JSON (agentapi.Usage for a
// node, agentapi.JobUsage for a job); the store does not read it.
type UsageRow struct {
	Compute string // the compute's key (Key of its ARM id)
	Node    string
	Job     string // the job's uid; "" for the node's own sample
	JobName string // the job's name in its workspace, for the metrics
	Time    time.Time
	Body    string
	// Latest are the numbers a metrics scrape reads of the latest sample.
	Latest UsageValues
}

// UsageValues are the gauges of one sample: a node's, or a job's (CPU,
// MemoryUsed and GPUs only). GPUs is a compact list the store does not
// read (agentapi.FormatGPUs).
type UsageValues struct {
	CPU                     float64
	MemoryUsed, MemoryTotal int64
	DiskUsed                int64
	NetworkRx, NetworkTx    int64
	GPUs                    string
}

// PutUsage stores samples and makes each its node's or job's latest when
// it is newer than the one recorded. A sample already stored (the same
// node, job and time, sent again or through another replica) is stored
// once.
func PutUsage(ctx context.Context, q Querier, rows []UsageRow) error {
	for _, r := range rows {
		ms := r.Time.UnixMilli()
		if _, err := q.ExecContext(ctx, `INSERT INTO usage_samples (compute, node, job, time, body) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (node, job, time) DO NOTHING`, r.Compute, r.Node, r.Job, ms, r.Body); err != nil {
			return fmt.Errorf("usage sample of %s: %w", r.Node, err)
		}
		v := r.Latest
		if _, err := q.ExecContext(ctx, `INSERT INTO usage_latest (node, job, compute, time, cpu, memory_used, memory_total, disk_used, net_rx, net_tx, gpus, job_name)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (node, job) DO UPDATE SET compute = excluded.compute, time = excluded.time, cpu = excluded.cpu,
				memory_used = excluded.memory_used, memory_total = excluded.memory_total, disk_used = excluded.disk_used,
				net_rx = excluded.net_rx, net_tx = excluded.net_tx, gpus = excluded.gpus, job_name = excluded.job_name
			WHERE usage_latest.time < excluded.time`,
			r.Node, r.Job, r.Compute, ms, v.CPU, v.MemoryUsed, v.MemoryTotal, v.DiskUsed, v.NetworkRx, v.NetworkTx, v.GPUs, r.JobName); err != nil {
			return fmt.Errorf("latest usage of %s: %w", r.Node, err)
		}
	}
	return nil
}

// UsageQuery selects samples of one compute: its nodes' own samples (Job
// ""), or one job's; optionally of one node; in [Since, Until] (zero: no
// bound), oldest first, at most Limit (0: 10,000).
type UsageQuery struct {
	Compute      string
	Node         string
	Job          string
	Since, Until time.Time
	Limit        int
}

// MaxUsageSamples bounds the samples one query returns.
const MaxUsageSamples = 10_000

// UsageSamples reads the samples q selects.
func UsageSamples(ctx context.Context, q Querier, uq UsageQuery) ([]UsageRow, error) {
	limit := uq.Limit
	if limit <= 0 || limit > MaxUsageSamples {
		limit = MaxUsageSamples
	}
	until := int64(1<<62 - 1)
	if !uq.Until.IsZero() {
		until = uq.Until.UnixMilli()
	}
	query := `SELECT compute, node, job, time, body FROM usage_samples
		WHERE compute = ? AND job = ? AND time >= ? AND time <= ?`
	args := []any{Key(uq.Compute), uq.Job, uq.Since.UnixMilli(), until}
	if uq.Node != "" {
		query += ` AND node = ?`
		args = append(args, uq.Node)
	}
	// The newest Limit, returned oldest first.
	query = `SELECT * FROM (` + query + ` ORDER BY time DESC, node DESC LIMIT ?) AS s ORDER BY time, node`
	args = append(args, limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage samples: %w", err)
	}
	defer rows.Close()
	var out []UsageRow
	for rows.Next() {
		var r UsageRow
		var ms int64
		if err := rows.Scan(&r.Compute, &r.Node, &r.Job, &ms, &r.Body); err != nil {
			return nil, fmt.Errorf("usage samples: %w", err)
		}
		r.Time = time.UnixMilli(ms).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// LatestUsage is a node's or a running job's latest sample.
type LatestUsage struct {
	Compute, Node, Job string
	JobName            string // the job's name in its workspace ("" for a node)
	UsageValues
}

// LatestUsages reads the latest sample of every node the store still has
// that an agent still serves (not unusable or preempted), and of every job
// on a node that still runs it: one row per node and one per job and
// node, never more however long the store has been up. (It reads no job
// records: the job's name is kept with its sample, and a node holds its
// job from assignment to exit.)
func LatestUsages(ctx context.Context, q Querier) ([]LatestUsage, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.compute, l.node, l.job, l.job_name,
		l.cpu, l.memory_used, l.memory_total, l.disk_used, l.net_rx, l.net_tx, l.gpus
		FROM usage_latest l JOIN nodes n ON n.id = l.node
		WHERE n.state != ? AND n.state != ? AND (l.job = '' OR n.job = l.job)`,
		api.NodeUnusable, api.NodePreempted)
	if err != nil {
		return nil, fmt.Errorf("latest usage: %w", err)
	}
	defer rows.Close()
	var out []LatestUsage
	for rows.Next() {
		var r LatestUsage
		if err := rows.Scan(&r.Compute, &r.Node, &r.Job, &r.JobName,
			&r.CPU, &r.MemoryUsed, &r.MemoryTotal, &r.DiskUsed, &r.NetworkRx, &r.NetworkTx, &r.GPUs); err != nil {
			return nil, fmt.Errorf("latest usage: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteUsageBefore forgets samples older than cutoff, and the latest
// samples of nodes the store no longer has or that are older than cutoff.
// It returns how many samples it removed.
func DeleteUsageBefore(ctx context.Context, q Querier, cutoff time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM usage_samples WHERE time < ?`, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("prune usage samples: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := q.ExecContext(ctx, `DELETE FROM usage_latest WHERE time < ? OR NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.id = usage_latest.node)`,
		cutoff.UnixMilli()); err != nil {
		return n, fmt.Errorf("prune latest usage: %w", err)
	}
	return n, nil
}
