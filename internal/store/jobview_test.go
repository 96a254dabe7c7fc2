package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// readJobSQL reads a job by its id from SQL, past any view.
func readJobSQL(ctx context.Context, q Querier, uid string) (Job, error) {
	return oneJob(ctx, q, `SELECT `+jobCols+` FROM jobs WHERE uid = ?`, uid)
}

// A read of a job by its id outside a transaction shows every committed
// write of it, however written (a transaction, a batch, the writer
// alone), and nothing of a transaction that was rolled back.
func TestJobReadsFollowCommittedWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	read := func(wantStatus string, wantVersion int64) Job {
		t.Helper()
		got, err := GetJobByUID(ctx, db.Q(), "j1")
		if err != nil || got.Doc.Properties.Status != wantStatus || got.Version != wantVersion {
			t.Fatalf("the job reads %s at version %d (%v), want %s at %d", got.Doc.Properties.Status, got.Version, err, wantStatus, wantVersion)
		}
		return got
	}
	j := queuedJob("j1", "train", 1, 0, "", "")
	if err := db.Tx(ctx, func(q Querier) error { return InsertJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	read(api.JobQueued, 1)
	// Placed, in a batch with another caller's write.
	other := queuedJob("j2", "eval", 1, 0, "", "")
	errs := make(chan error, 2)
	for _, f := range []func(Querier) error{
		func(q Querier) error {
			j.Doc.Properties.Status, j.Nodes = api.JobStarting, []string{"n1"}
			return UpdateJob(ctx, q, j)
		},
		func(q Querier) error { return InsertJob(ctx, q, other) },
	} {
		go func() { errs <- db.Tx(ctx, f) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := read(api.JobStarting, 2); !reflect.DeepEqual(got.Nodes, []string{"n1"}) {
		t.Fatalf("the placed job's nodes read %v", got.Nodes)
	}
	refused := errors.New("refused")
	err := db.Tx(ctx, func(q Querier) error {
		c := *j
		c.Doc.Properties.Status = api.JobRunning
		if err := UpdateJob(ctx, q, &c); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("the rolled-back transaction returned %v", err)
	}
	read(api.JobStarting, 2)
	j.Doc.Properties.Status = api.JobRunning
	if err := UpdateJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	read(api.JobRunning, 3)
	j.Doc.Properties.Status = api.JobCompleted
	if err := db.Tx(ctx, func(q Querier) error { return UpdateJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	read(api.JobCompleted, 4)
	if err := db.Tx(ctx, func(q Querier) error { return DeleteJob(ctx, q, "j1") }); err != nil {
		t.Fatal(err)
	}
	if got, err := GetJobByUID(ctx, db.Q(), "j1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after its removal the job reads %+v (%v), want not found", got.Doc.Properties.Status, err)
	}
}

// The job a read gets from the view is the one SQL gives: the row as
// stored and its document decoded, not the value its writer held; and a
// caller's change of its copy reaches no other reader.
func TestJobViewHoldsTheRowAsStored(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sqliteOnly(t, db)
	j := queuedJob("j1", "Train", 1, 3, "img", "")
	j.Parent, j.Compute = "/WS", "/Computes/GPU" // stored as keys
	j.Created = time.Now().In(time.FixedZone("CET", 3600))
	j.Doc.Properties.EnvironmentVariables = map[string]string{"A": "1"}
	if err := db.Tx(ctx, func(q Querier) error {
		if err := InsertJob(ctx, q, j); err != nil {
			return err
		}
		j.Doc.Properties.Status, j.Nodes = api.JobRunning, []string{"n1", "n2"}
		return UpdateJob(ctx, q, j)
	}); err != nil {
		t.Fatal(err)
	}
	if _, held := db.views.jobs.get("j1"); !held {
		t.Fatal("the view does not hold a running job its writer placed")
	}
	viewed, err := GetJobByUID(ctx, db.Q(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := readJobSQL(ctx, db.Q(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viewed, stored) {
		t.Fatalf("the view holds\n%+v\nSQL reads\n%+v", viewed, stored)
	}
	viewed.Doc.Properties.EnvironmentVariables["A"] = "2"
	viewed.Nodes[0] = "n9"
	again, _ := GetJobByUID(ctx, db.Q(), "j1")
	if again.Doc.Properties.EnvironmentVariables["A"] != "1" || again.Nodes[0] != "n1" {
		t.Fatalf("a caller's change in place shows in the next read: %v %v", again.Doc.Properties.EnvironmentVariables, again.Nodes)
	}
}

// A SQLite store's server is its only writer, and reads a job on nodes
// from what it wrote: a change made to the file by another process is not
// seen. A queued job is not held (a queue is too long to hold) and is
// read from SQL.
func TestJobReadsOnNodesAreAnsweredFromTheView(t *testing.T) {
	ctx := context.Background()
	db, other := twoStoresOfOneFile(t)
	running, queued := queuedJob("run", "run", 1, 0, "", ""), queuedJob("wait", "wait", 1, 0, "", "")
	if err := db.Tx(ctx, func(q Querier) error {
		if err := InsertJob(ctx, q, running); err != nil {
			return err
		}
		if err := InsertJob(ctx, q, queued); err != nil {
			return err
		}
		running.Doc.Properties.Status = api.JobRunning
		return UpdateJob(ctx, q, running)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.W().ExecContext(ctx, `UPDATE jobs SET version = version + 10`); err != nil {
		t.Fatal(err)
	}
	if got, err := GetJobByUID(ctx, db.Q(), "run"); err != nil || got.Version != 2 {
		t.Fatalf("the running job reads version %d (%v): not from the view", got.Version, err)
	}
	if got, err := GetJobByUID(ctx, db.Q(), "wait"); err != nil || got.Version != 11 {
		t.Fatalf("the queued job reads version %d (%v), want the row as changed", got.Version, err)
	}
}

// The view holds jobs on nodes only, and at most its bound: a read of a
// queued or ended job, or of one past the bound, is not kept, and a job
// that ends leaves the view.
func TestJobViewHoldsJobsOnNodesOnly(t *testing.T) {
	v := newRowView(func(r jobRow) jobRow { return r }, onNodes, 2)
	row := func(status string) jobRow {
		return jobRow{compute: "/c", status: status, body: "{}", seq: 1, version: 1}
	}
	v.fill("q", row(api.JobQueued), begin(v))
	v.fill("done", row(api.JobCompleted), begin(v))
	v.fill("parent", jobRow{status: api.JobRunning}, begin(v)) // a sweep: on no nodes of its own
	for _, id := range []string{"q", "done", "parent"} {
		if _, ok := v.get(id); ok {
			t.Errorf("the view kept %s", id)
		}
	}
	for i := range 3 {
		v.fill(fmt.Sprint("r", i), row(api.JobRunning), begin(v))
	}
	if _, ok := v.get("r2"); ok || len(v.rows) != 2 {
		t.Fatalf("the view holds %d jobs past its bound of 2", len(v.rows))
	}
	ended := row(api.JobFailed)
	commit(v, jobChange{id: "r0", put: &ended, edit: func(r jobRow) jobRow { r.status = api.JobFailed; return r }})
	if _, ok := v.get("r0"); ok {
		t.Fatal("an ended job stayed in the view")
	}
	// An edit of a job not held, with nothing to put, adds nothing.
	commit(v, jobChange{id: "r2", edit: func(r jobRow) jobRow { r.version++; return r }})
	if _, ok := v.get("r2"); ok {
		t.Fatal("an edit made up a job the view did not hold")
	}
}
