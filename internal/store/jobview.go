package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// jobView holds the jobs on nodes as this process last wrote or read them
// (rowView): every poll of a busy node reads the job it runs, by its id.
// The view holds a job's row as SQL does (its stored document, not a
// decoded value a caller could change), and only while the job is past
// the queue and not ended: those are the jobs the polls read, and a queue
// of a hundred thousand jobs would not fit.
type jobView = rowView[jobRow]

// jobChange is one write of a job's row.
type jobChange = rowChange[jobRow]

// jobRow is a job's row: its columns and stored document.
type jobRow struct {
	parent, compute, status, body string
	seq, version, created         int64
	dec                           *decoded // body decoded, once held
}

// maxViewedJobs bounds the jobs the view holds; past it, a job's polls
// read it from SQL.
const maxViewedJobs = 1 << 14

func newJobView() *jobView {
	return newRowView(func(r jobRow) jobRow { r.dec = holder(r.dec); return r }, onNodes, maxViewedJobs)
}

// onNodes says whether a job's row is one the view holds: the job of a
// compute, placed and not ended.
func onNodes(r jobRow) bool {
	return r.compute != "" && r.status != api.JobQueued && r.status != api.JobNotStarted && !api.JobTerminal(r.status)
}

// job decodes the row of job uid.
func (r jobRow) job(uid string) (Job, error) {
	j := Job{UID: uid, Parent: r.parent, Compute: r.compute, Seq: r.seq, Version: r.version}
	b, err := decodeVia[jobBody](r.dec, r.body)
	if err != nil {
		return Job{}, fmt.Errorf("decode job %s: %w", uid, err)
	}
	j.setBody(b, r.created)
	return j, nil
}

// rowOf is the row job j is stored as, with body its stored document.
func rowOf(j *Job, body string) jobRow {
	return jobRow{parent: Key(j.Parent), compute: Key(j.Compute), status: j.Doc.Properties.Status, body: body,
		seq: j.Seq, version: j.Version, created: j.Created.UnixMilli()}
}

// updated is the change UpdateJob made to a row: its document, status and
// version. A row the view does not hold is put whole from j, whose other
// columns (parent, compute, sequence, creation) no update changes, when j
// has them as read or inserted.
func updated(j *Job, body string) jobChange {
	r := rowOf(j, body)
	c := jobChange{id: j.UID, edit: func(held jobRow) jobRow {
		held.status, held.body, held.version = r.status, r.body, r.version
		return held
	}}
	if j.Seq != 0 && !j.Created.IsZero() {
		c.put = &r
	}
	return c
}

// GetJobByUID reads a job by its internal id.
func GetJobByUID(ctx context.Context, q Querier, uid string) (Job, error) {
	v := viewOf(q, jobsOf, uid)
	if v == nil {
		return oneJob(ctx, q, `SELECT `+jobCols+` FROM jobs WHERE uid = ?`, uid)
	}
	r, ok, from := v.held(uid)
	if ok {
		return r.job(uid)
	}
	err := q.QueryRowContext(ctx, `SELECT parent, compute, status, seq, version, body, created FROM jobs WHERE uid = ?`, uid).
		Scan(&r.parent, &r.compute, &r.status, &r.seq, &r.version, &r.body, &r.created)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("job: %w", ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("query jobs: %w", err)
	}
	v.fill(uid, r, from)
	return r.job(uid)
}
