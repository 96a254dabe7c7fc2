package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Metric is one value a job logged of one metric (MLflow's Metric): the
// same name may be logged at many steps, and at one step more than once.
type Metric struct {
	Name  string
	Value float64
	Step  int64
	Time  time.Time // the job's timestamp, millisecond precision
}

// RunValue is a param or tag of a job's run.
type RunValue struct {
	Name, Value string
}

// ErrParamChanged: a param was logged again with another value (MLflow's
// params are immutable).
var ErrParamChanged = errors.New("param already logged with another value")

// Kinds of RunValue rows in job_params.
const (
	kindParam = "param"
	kindTag   = "tag"
)

// MaxMetricValues bounds the values a job may log, so that every value
// stored can be read back at once (a variable for tests).
var MaxMetricValues = 100_000

// ErrMetricLimit: a job logged MaxMetricValues metric values already.
var ErrMetricLimit = errors.New("too many metric values")

// MaxParams and MaxTags bound the params and tags one job keeps (their
// values are bounded by the MLflow API: 6,000 and 8,000 bytes); variables
// for tests.
var (
	MaxParams = 1000
	MaxTags   = 1000
)

// ErrRunLimit: a job or its workspace keeps as much run data (params,
// tags, metric values) as it may.
var ErrRunLimit = errors.New("run data limit reached")

// kindCount is the kind of the job_params rows that count a job's run
// data: its metric values ('metrics'), params, tags, and the bytes of all
// three ('bytes', what the workspace's limit adds up).
const kindCount = "count"

// metricBytes is what one metric value counts against a workspace's run
// data besides its name: its step, time and value.
const metricBytes = 24

// runCount reads one of a job's counts (0 when it has none).
func runCount(ctx context.Context, q Querier, job, name string) (int64, error) {
	var had string
	err := q.QueryRowContext(ctx, `SELECT value FROM job_params WHERE job = ? AND kind = ? AND name = ?`, job, kindCount, name).Scan(&had)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("run data count: %w", err)
	}
	n, _ := strconv.ParseInt(had, 10, 64)
	return n, nil
}

// addRunCount adds delta to one of a job's counts and returns the sum.
func addRunCount(ctx context.Context, q Querier, job, name string, delta int64) (int64, error) {
	n, err := runCount(ctx, q, job, name)
	if err != nil || delta == 0 {
		return n, err
	}
	n += delta
	if _, err := q.ExecContext(ctx, `INSERT INTO job_params (job, kind, name, value) VALUES (?, ?, ?, ?)
		ON CONFLICT (job, kind, name) DO UPDATE SET value = excluded.value`, job, kindCount, name, strconv.FormatInt(n, 10)); err != nil {
		return 0, fmt.Errorf("run data count: %w", err)
	}
	return n, nil
}

// RunBytes is the size of what job keeps of run data: its params' and
// tags' names and values, and its metric values.
func RunBytes(ctx context.Context, q Querier, job string) (int64, error) {
	return runCount(ctx, q, job, "bytes")
}

// WorkspaceRunBytes adds up RunBytes of every job of a workspace (its id).
func WorkspaceRunBytes(ctx context.Context, q Querier, workspace string) (int64, error) {
	var n sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT SUM(CAST(p.value AS BIGINT)) FROM jobs j JOIN job_params p ON p.job = j.uid
		WHERE j.parent = ? AND p.kind = ? AND p.name = 'bytes'`, Key(workspace), kindCount).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("workspace run data: %w", err)
	}
	return n.Int64, nil
}

// PutMetrics stores metric values of job (its uid). A value logged again
// (the same name, step, time and value: a retried request) is stored once.
// Past MaxMetricValues values in all it is ErrMetricLimit, and the
// caller's transaction rolls back.
func PutMetrics(ctx context.Context, q Querier, job string, ms []Metric) error {
	if len(ms) == 0 {
		return nil
	}
	stored, err := runCount(ctx, q, job, "metrics")
	if err != nil {
		return err
	}
	var size int64
	for _, m := range ms {
		res, err := q.ExecContext(ctx, `INSERT INTO job_metrics (job, name, step, time, value) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (job, name, step, time, value) DO NOTHING`, job, m.Name, m.Step, m.Time.UnixMilli(), m.Value)
		if err != nil {
			return fmt.Errorf("metric %s: %w", m.Name, err)
		}
		n, _ := res.RowsAffected()
		stored += n
		size += n * int64(len(m.Name)+metricBytes)
	}
	if stored > int64(MaxMetricValues) {
		return fmt.Errorf("%w: a job keeps at most %d", ErrMetricLimit, MaxMetricValues)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO job_params (job, kind, name, value) VALUES (?, ?, 'metrics', ?)
		ON CONFLICT (job, kind, name) DO UPDATE SET value = excluded.value`, job, kindCount, strconv.FormatInt(stored, 10)); err != nil {
		return fmt.Errorf("metric count: %w", err)
	}
	_, err = addRunCount(ctx, q, job, "bytes", size)
	return err
}

// Metrics reads the values job logged of one metric (name "": of every
// metric), ordered by name, step and time; at most MaxMetricValues.
func Metrics(ctx context.Context, q Querier, job, name string) ([]Metric, error) {
	query := `SELECT name, value, step, time FROM job_metrics WHERE job = ?`
	args := []any{job}
	if name != "" {
		query += ` AND name = ?`
		args = append(args, name)
	}
	query += ` ORDER BY name, step, time, value LIMIT ?`
	args = append(args, MaxMetricValues)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return scanMetrics(rows, "metrics")
}

// LatestMetrics is each metric's latest value, as MLflow picks it: the
// highest step, then the latest time, then the largest value. Sorted by
// name.
func LatestMetrics(ctx context.Context, q Querier, job string) ([]Metric, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, value, step, time FROM (
			SELECT name, value, step, time, ROW_NUMBER() OVER (PARTITION BY name ORDER BY step DESC, time DESC, value DESC) AS r
			FROM job_metrics WHERE job = ?) AS m
		WHERE r = 1 ORDER BY name`, job)
	if err != nil {
		return nil, fmt.Errorf("latest metrics: %w", err)
	}
	return scanMetrics(rows, "latest metrics")
}

// PutParams stores params of job. A param logged again with the same
// value is fine; with another value it is ErrParamChanged and nothing of
// ps is stored by this call's statement for it (the caller's transaction
// rolls back the rest). Past MaxParams params it is ErrRunLimit.
func PutParams(ctx context.Context, q Querier, job string, ps []RunValue) error {
	var added, size int64
	for _, p := range ps {
		var old string
		err := q.QueryRowContext(ctx, `SELECT value FROM job_params WHERE job = ? AND kind = ? AND name = ?`, job, kindParam, p.Name).Scan(&old)
		switch {
		case err == nil && old == p.Value:
			continue
		case err == nil:
			return fmt.Errorf("%w: %s is %q, not %q", ErrParamChanged, p.Name, old, p.Value)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("param %s: %w", p.Name, err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO job_params (job, kind, name, value) VALUES (?, ?, ?, ?)`, job, kindParam, p.Name, p.Value); err != nil {
			return fmt.Errorf("param %s: %w", p.Name, err)
		}
		added++
		size += int64(len(p.Name) + len(p.Value))
	}
	n, err := addRunCount(ctx, q, job, "params", added)
	if err != nil {
		return err
	}
	if n > int64(MaxParams) {
		return fmt.Errorf("%w: a job keeps at most %d params", ErrRunLimit, MaxParams)
	}
	_, err = addRunCount(ctx, q, job, "bytes", size)
	return err
}

// PutTags stores tags of job, replacing a tag's earlier value. Past
// MaxTags tags it is ErrRunLimit.
func PutTags(ctx context.Context, q Querier, job string, ts []RunValue) error {
	var added, size int64
	for _, t := range ts {
		var old string
		err := q.QueryRowContext(ctx, `SELECT value FROM job_params WHERE job = ? AND kind = ? AND name = ?`, job, kindTag, t.Name).Scan(&old)
		switch {
		case err == nil:
			size += int64(len(t.Value) - len(old))
		case errors.Is(err, sql.ErrNoRows):
			added++
			size += int64(len(t.Name) + len(t.Value))
		default:
			return fmt.Errorf("tag %s: %w", t.Name, err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO job_params (job, kind, name, value) VALUES (?, ?, ?, ?)
			ON CONFLICT (job, kind, name) DO UPDATE SET value = excluded.value`, job, kindTag, t.Name, t.Value); err != nil {
			return fmt.Errorf("tag %s: %w", t.Name, err)
		}
	}
	n, err := addRunCount(ctx, q, job, "tags", added)
	if err != nil {
		return err
	}
	if n > int64(MaxTags) {
		return fmt.Errorf("%w: a job keeps at most %d tags", ErrRunLimit, MaxTags)
	}
	_, err = addRunCount(ctx, q, job, "bytes", size)
	return err
}

// RunData reads job's params and tags, each sorted by name.
func RunData(ctx context.Context, q Querier, job string) (params, tags []RunValue, err error) {
	rows, err := q.QueryContext(ctx, `SELECT kind, name, value FROM job_params WHERE job = ? AND kind IN (?, ?) ORDER BY kind, name`, job, kindParam, kindTag)
	if err != nil {
		return nil, nil, fmt.Errorf("run data: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var v RunValue
		if err := rows.Scan(&kind, &v.Name, &v.Value); err != nil {
			return nil, nil, fmt.Errorf("run data: %w", err)
		}
		if kind == kindParam {
			params = append(params, v)
		} else {
			tags = append(tags, v)
		}
	}
	return params, tags, rows.Err()
}

// scanMetrics reads rows of name, value, step, time (ms); what names the
// query in errors. It closes rows.
func scanMetrics(rows *sql.Rows, what string) ([]Metric, error) {
	defer rows.Close()
	var out []Metric
	for rows.Next() {
		var m Metric
		var ms int64
		if err := rows.Scan(&m.Name, &m.Value, &m.Step, &ms); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		m.Time = time.UnixMilli(ms).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
