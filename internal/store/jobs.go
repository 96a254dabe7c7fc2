package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Job is a stored job: the ARM document plus what the control plane
// needs to run it. UID is the job's internal id (agents use it).
type Job struct {
	UID     string
	Parent  string // the workspace id
	Compute string // the compute id
	Seq     int64  // submission order
	Version int64
	Created time.Time
	Doc     api.Job
	// Run state, kept with the document.
	Attempt int            // the current (or last) attempt number, 0 before the first start
	Nodes   []string       // nodes of the current attempt, by rank
	Exits   map[string]int // exit codes of the current attempt's nodes that have ended
	// Preemptions counts attempts that ended because a node was preempted;
	// they do not count against the failure retry limit.
	Preemptions int
	// PortRetries counts attempts that ended because a port the job was
	// given was in use on one of its nodes; they do not count against the
	// failure retry limit either (the next attempt gets other ports).
	PortRetries int
	// MPIDone: the current attempt's node rank 0 ran mpirun over the job's
	// nodes and it ended with 0; the other nodes' launchers are told to
	// stop, and how they end no longer decides the job's result.
	MPIDone bool
	// Reclaims counts attempts that the compute's queue policy stopped for
	// another job (fair share, priority); they count against no limit.
	// Reclaimed is the last such attempt: its nodes stop it with the
	// preemption grace.
	Reclaims, Reclaimed int
	// EmptyOutputs are the outputs its nodes reported left empty when
	// their part ended, by attempt and rank: kept with the job rather than
	// as empty uploads (files.Outputs reads them as such).
	EmptyOutputs []EmptyOutput

	ran runMark // what the cost ledger holds of its latest attempt
	// stored is the status the store holds for Version: what an update
	// of this version replaces ("" for a job not read from the store).
	stored string
}

type jobBody struct {
	Doc     api.Job        `json:"doc"`
	Attempt int            `json:"attempt"`
	Nodes   []string       `json:"nodes,omitempty"`
	Exits   map[string]int `json:"exits,omitempty"`
	Preempt int            `json:"preemptions,omitempty"`
	Ports   int            `json:"portRetries,omitempty"`
	MPIDone bool           `json:"mpiDone,omitempty"`
	Reclaim int            `json:"reclaims,omitempty"`
	Last    int            `json:"reclaimed,omitempty"`
	Empty   []EmptyOutput  `json:"emptyOutputs,omitempty"`
}

// EmptyOutput is one rank's output of one attempt that its node left
// empty.
type EmptyOutput struct {
	Name    string `json:"name"`
	Attempt int    `json:"attempt"`
	Rank    int    `json:"rank"`
}

func bodyOf(j *Job) jobBody {
	return jobBody{Doc: j.Doc, Attempt: j.Attempt, Nodes: j.Nodes, Exits: j.Exits, Preempt: j.Preemptions,
		Ports: j.PortRetries, MPIDone: j.MPIDone, Reclaim: j.Reclaims, Last: j.Reclaimed, Empty: j.EmptyOutputs}
}

// InsertJob stores a new job, giving it the next submission sequence.
func InsertJob(ctx context.Context, q Querier, j *Job) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return InsertJob(ctx, q, j) }); own {
		return err
	}
	encoded, err := json.Marshal(bodyOf(j))
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	body := string(encoded) // one copy, for the statement and the view
	// SQLite runs one transaction at a time: the next number is the
	// largest plus one. PostgreSQL's transactions run side by side: a
	// sequence hands out numbers without making them conflict.
	next := `SELECT coalesce(max(seq), 0) + 1 FROM jobs`
	if engineOf(q) == postgresEngine {
		next = `SELECT nextval('jobs_seq_source')`
	}
	var seq int64
	if err := q.QueryRowContext(ctx, next).Scan(&seq); err != nil {
		return fmt.Errorf("insert job: %w", err)
	}
	p := &j.Doc.Properties
	group, started, minRuntime := shareColumns(j)
	_, err = q.ExecContext(ctx, `INSERT INTO jobs (uid, parent, name, compute, status, seq, version, body, created, priority, nodes, image, quota_wait,
		share_group, started, min_runtime)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.UID, Key(j.Parent), Key(j.Doc.Name), Key(j.Compute), p.Status, seq, body, j.Created.UnixMilli(),
		p.Priority, j.Doc.InstanceCount(), p.Image, p.Waiting != nil, group, started, minRuntime)
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("job %s: %w", j.Doc.Name, ErrExists)
		}
		return fmt.Errorf("insert job: %w", err)
	}
	j.Seq, j.Version, j.stored = seq, 1, p.Status
	r := rowOf(j, body)
	wrote(q, jobsOf, jobChange{id: j.UID, put: &r})
	if err := ledgerRun(ctx, q, j); err != nil {
		return err
	}
	if n, ok := noting(q); ok {
		n.note(JobTransition{Compute: Key(j.Compute), To: p.Status})
	}
	return nil
}

// UpdateJob writes a job back if its version is unchanged (ErrETagMismatch
// otherwise) and bumps the version.
func UpdateJob(ctx context.Context, q Querier, j *Job) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return UpdateJob(ctx, q, j) }); own {
		return err
	}
	encoded, err := json.Marshal(bodyOf(j))
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	body := string(encoded) // one copy, for the statement and the view
	p := &j.Doc.Properties
	n, noted := noting(q)
	// The update below applies only to the version j was read at, whose
	// status j remembers: the status it replaces needs no read.
	was := j.stored
	if noted && was == "" {
		if err := q.QueryRowContext(ctx, `SELECT status FROM jobs WHERE uid = ?`, j.UID).Scan(&was); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("update job: %w", err)
		}
	}
	group, started, minRuntime := shareColumns(j)
	res, err := q.ExecContext(ctx, `UPDATE jobs SET status = ?, version = version + 1, body = ?, priority = ?, nodes = ?, image = ?, quota_wait = ?,
		share_group = ?, started = ?, min_runtime = ?
		WHERE uid = ? AND version = ?`,
		p.Status, body, p.Priority, j.Doc.InstanceCount(), p.Image, p.Waiting != nil, group, started, minRuntime, j.UID, j.Version)
	if err != nil {
		return fmt.Errorf("update job: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("job %s: %w", j.Doc.Name, ErrETagMismatch)
	}
	j.Version++
	j.stored = p.Status
	wrote(q, jobsOf, updated(j, body))
	if err := ledgerRun(ctx, q, j); err != nil {
		return err
	}
	if noted && p.Status != was {
		t := JobTransition{Compute: Key(j.Compute), From: was, To: p.Status}
		if p.Status == api.JobRunning && j.Attempt <= 1 && p.StartTime != nil {
			t.Queued = p.StartTime.Sub(j.Created)
		}
		n.note(t)
	}
	return nil
}

// DeleteJob removes a job record.
func DeleteJob(ctx context.Context, q Querier, uid string) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return DeleteJob(ctx, q, uid) }); own {
		return err
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM jobs WHERE uid = ?`, uid); err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	wrote(q, jobsOf, jobChange{id: uid})
	return nil
}

const jobCols = `uid, parent, compute, seq, version, body, created`

// GetJob reads a job by workspace and name.
func GetJob(ctx context.Context, q Querier, parent, name string) (Job, error) {
	return oneJob(ctx, q, `SELECT `+jobCols+` FROM jobs WHERE parent = ? AND name = ?`, Key(parent), Key(name))
}

// JobsByStatus lists a compute's jobs in the given statuses, oldest first.
func JobsByStatus(ctx context.Context, q Querier, compute string, statuses ...string) ([]Job, error) {
	query := `SELECT ` + jobCols + ` FROM jobs WHERE compute = ? AND status IN (` + placeholders(len(statuses)) + `) ORDER BY seq`
	args := []any{Key(compute)}
	for _, s := range statuses {
		args = append(args, s)
	}
	return queryJobs(ctx, q, query, args...)
}

// QueuedJob is what the scheduler reads of a queued job (no document).
type QueuedJob struct {
	UID       string
	Name      string // its name as the store keys it (lower case)
	Seq       int64
	Priority  int
	Nodes     int    // instance count, at least 1
	Image     string // the job's image, "" for none
	QuotaWait bool   // it waits for a reason of its own (Waiting: quota)
	Group     string // its fair-share group (QueuedJobsByGroup)
}

// queueHead reads the head of a compute's queue (QueuedJobs).
const queueHead = `SELECT uid, name, seq, priority, nodes, image, quota_wait FROM jobs
	WHERE compute = ? AND ` + isQueued + ` ORDER BY priority DESC, seq LIMIT ?`

// QueuedJobs lists the head of a compute's queue in scheduling order
// (priority, highest first, then submission), at most limit jobs, from an
// index and columns only: cheap with a hundred thousand jobs queued.
func QueuedJobs(ctx context.Context, q Querier, compute string, limit int) ([]QueuedJob, error) {
	rows, err := q.QueryContext(ctx, queueHead, Key(compute), limit)
	if err != nil {
		return nil, fmt.Errorf("queued jobs: %w", err)
	}
	defer rows.Close()
	var out []QueuedJob
	for rows.Next() {
		var j QueuedJob
		if err := rows.Scan(&j.UID, &j.Name, &j.Seq, &j.Priority, &j.Nodes, &j.Image, &j.QuotaWait); err != nil {
			return nil, fmt.Errorf("queued jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ActiveJob is what the cluster controller reads of a job that was given
// nodes and has not ended (no document).
type ActiveJob struct {
	UID   string
	Nodes int // instance count, at least 1
}

// ActiveJobs lists a compute's jobs between assignment and end (Preparing,
// Starting, Running, Finalizing, CancelRequested) from an index and
// columns only. Jobs that hold no nodes of their own (sweeps) are among
// them.
func ActiveJobs(ctx context.Context, q Querier, compute string) ([]ActiveJob, error) {
	rows, err := q.QueryContext(ctx, `SELECT uid, nodes FROM jobs WHERE compute = ? AND status IN (?, ?, ?, ?, ?)`,
		Key(compute), api.JobPreparing, api.JobStarting, api.JobRunning, api.JobFinalizing, api.JobCancelRequested)
	if err != nil {
		return nil, fmt.Errorf("active jobs: %w", err)
	}
	defer rows.Close()
	var out []ActiveJob
	for rows.Next() {
		var j ActiveJob
		if err := rows.Scan(&j.UID, &j.Nodes); err != nil {
			return nil, fmt.Errorf("active jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// QueuedDemand counts a compute's queued jobs and the nodes they need.
func QueuedDemand(ctx context.Context, q Querier, compute string) (jobs, nodes int, err error) {
	err = q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(nodes), 0) FROM jobs WHERE compute = ? AND status = ?`,
		Key(compute), api.JobQueued).Scan(&jobs, &nodes)
	if err != nil {
		err = fmt.Errorf("queued demand: %w", err)
	}
	return jobs, nodes, err
}

// Submission is what the adaptive idle policy learns of a new job: when it
// was submitted and how many nodes it needs.
type Submission struct {
	Seq     int64
	Nodes   int // instance count, at least 1
	Created time.Time
}

// anyStatus matches every job status: with it a compute's jobs are read
// from the (compute, status, seq) index in seq ranges, one seek per status.
var anyStatus = `status IN (` + placeholders(len(api.JobStatuses)) + `)`

func computeAnyStatus(compute string) []any {
	args := []any{Key(compute)}
	for _, s := range api.JobStatuses {
		args = append(args, s)
	}
	return args
}

// SubmittedAfter lists a compute's jobs submitted after the one with
// sequence number seq, in submission order, from the index and columns
// only: a pass calls it for the jobs that are new since the last.
func SubmittedAfter(ctx context.Context, q Querier, compute string, seq int64) ([]Submission, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, nodes, created FROM jobs WHERE compute = ? AND `+anyStatus+` AND seq > ? ORDER BY seq`,
		append(computeAnyStatus(compute), seq)...)
	if err != nil {
		return nil, fmt.Errorf("submitted jobs: %w", err)
	}
	defer rows.Close()
	var out []Submission
	for rows.Next() {
		var s Submission
		var created int64
		if err := rows.Scan(&s.Seq, &s.Nodes, &created); err != nil {
			return nil, fmt.Errorf("submitted jobs: %w", err)
		}
		s.Nodes = max(s.Nodes, 1)
		s.Created = time.UnixMilli(created).UTC()
		out = append(out, s)
	}
	return out, rows.Err()
}

// RecentJobs reads a compute's newest jobs by submission, at most limit,
// oldest first. Only those jobs' documents are read, however many the
// compute has.
func RecentJobs(ctx context.Context, q Querier, compute string, limit int) ([]Job, error) {
	var from int64
	err := q.QueryRowContext(ctx, `SELECT seq FROM jobs WHERE compute = ? AND `+anyStatus+` ORDER BY seq DESC LIMIT 1 OFFSET ?`,
		append(computeAnyStatus(compute), max(limit, 1)-1)...).Scan(&from)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("recent jobs: %w", err)
	}
	return queryJobs(ctx, q, `SELECT `+jobCols+` FROM jobs WHERE compute = ? AND `+anyStatus+` AND seq >= ? ORDER BY seq`,
		append(computeAnyStatus(compute), from)...)
}

// ListJobs pages a workspace's jobs by name after the cursor, optionally
// only those in one status.
func ListJobs(ctx context.Context, q Querier, parent, status, after string, limit int) ([]Job, error) {
	query, args := listJobsQuery(parent, status, after, limit)
	return queryJobs(ctx, q, query, args...)
}

// listJobsQuery is the query of a page of a workspace's jobs by name.
func listJobsQuery(parent, status, after string, limit int) (string, []any) {
	query := `SELECT ` + jobCols + ` FROM jobs WHERE parent = ? AND name > ?`
	args := []any{Key(parent), Key(after)}
	if status != "" {
		query += ` AND status = ?`
		args = append(args, status)
	}
	query += ` ORDER BY name LIMIT ?`
	return query, append(args, limit)
}

// CountJobs counts a compute's jobs in the given statuses.
func CountJobs(ctx context.Context, q Querier, compute string, statuses ...string) (int, error) {
	args := []any{Key(compute)}
	for _, s := range statuses {
		args = append(args, s)
	}
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE compute = ? AND status IN (`+placeholders(len(statuses))+`)`, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}

func oneJob(ctx context.Context, q Querier, query string, args ...any) (Job, error) {
	jobs, err := queryJobs(ctx, q, query, args...)
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 0 {
		return Job{}, fmt.Errorf("job: %w", ErrNotFound)
	}
	return jobs[0], nil
}

func queryJobs(ctx context.Context, q Querier, query string, args ...any) ([]Job, error) {
	return queryJobsVia(ctx, q, nil, query, args...)
}

// queryJobsVia is queryJobs taking the decoded jobs the cache c holds
// unchanged (no cache: nil).
func queryJobsVia(ctx context.Context, q Querier, c *JobCache, query string, args ...any) ([]Job, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		var j Job
		var body sql.RawBytes
		var created int64
		if err := rows.Scan(&j.UID, &j.Parent, &j.Compute, &j.Seq, &j.Version, &body, &created); err != nil {
			return nil, fmt.Errorf("scan job: %w", err)
		}
		if hit, ok := c.get(j.UID, body); ok {
			out = append(out, hit)
			continue
		}
		if err := decodeJobBody(&j, body, created); err != nil {
			return nil, err
		}
		c.put(j, string(body))
		out = append(out, j)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("scan jobs: %w", err)
	}
	return out, nil
}

func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
	}
	return string(b)
}

func isUnique(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "UNIQUE constraint") || strings.Contains(err.Error(), "duplicate key"))
}
