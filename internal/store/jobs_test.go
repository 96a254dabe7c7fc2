package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// openTest opens an empty store on the engine CUMULUS_TEST_STORE names:
// "postgres" (a private PostgreSQL, see pgtest) or SQLite (the default).
// CI runs this package's tests on both.
func openTest(t testing.TB) *DB {
	t.Helper()
	var db *DB
	var err error
	if os.Getenv("CUMULUS_TEST_STORE") == "postgres" {
		db, err = OpenPostgres(context.Background(), pgtest.DSN(t))
	} else {
		db, err = OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteOnly skips a test of SQLite's own machinery (migrations of old
// files, the statement cache) when the tests run on PostgreSQL.
func sqliteOnly(t *testing.T, db *DB) {
	if db.Engine() != "sqlite" {
		t.Skip("SQLite's own machinery")
	}
}

func queuedJob(uid, name string, nodes int32, priority int, image, msg string) *Job {
	j := &Job{UID: uid, Parent: "/ws", Compute: "/c", Created: time.Unix(1, 0)}
	j.Doc.Name = name
	j.Doc.Properties.Status = api.JobQueued
	j.Doc.Properties.Priority = priority
	j.Doc.Properties.Image = image
	j.Doc.Properties.StatusMessage = msg
	if nodes > 0 {
		j.Doc.Properties.Resources = &api.JobResources{InstanceCount: nodes}
	}
	return j
}

// The scheduler's columns follow the document on insert and update, and
// the migration's backfill reads the same values from old documents.
func TestQueuedJobsColumns(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	a := queuedJob("u1", "a", 3, 5, "torch:2", "")
	a.Doc.Properties.Waiting = &api.Block{Kind: api.BlockQuota}
	b := queuedJob("u2", "b", 0, 0, "", "")
	for _, j := range []*Job{a, b} {
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	want := []QueuedJob{{UID: "u1", Name: "a", Seq: a.Seq, Priority: 5, Nodes: 3, Image: "torch:2", QuotaWait: true}, {UID: "u2", Name: "b", Seq: b.Seq, Nodes: 1}}
	check := func(when string) {
		t.Helper()
		got, err := QueuedJobs(ctx, db.Q(), "/c", 10)
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: QueuedJobs = %+v, %v; want %+v", when, got, err, want)
		}
		jobs, nodes, err := QueuedDemand(ctx, db.Q(), "/c")
		if err != nil || jobs != 2 || nodes != want[0].Nodes+want[1].Nodes {
			t.Errorf("%s: QueuedDemand = %d jobs, %d nodes, %v", when, jobs, nodes, err)
		}
	}
	check("after insert")

	a.Doc.Properties.Priority, a.Doc.Properties.Waiting = 9, nil
	if err := UpdateJob(ctx, db.W(), a); err != nil {
		t.Fatal(err)
	}
	want[0].Priority, want[0].QuotaWait = 9, false
	check("after update")

	if db.Engine() == "postgres" {
		return // the backfill is part of SQLite's migrations only
	}
	// Stale columns (as before migration 5) are filled from the documents.
	if _, err := db.W().ExecContext(ctx, `UPDATE jobs SET priority = 0, nodes = 1, image = '', quota_wait = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.W().ExecContext(ctx, backfillJobColumns); err != nil {
		t.Fatal(err)
	}
	check("after the backfill")
}

// The node counts the triggers keep agree with counting the nodes, through
// inserts, state changes (plain updates and upserts) and deletes.
func TestNodeCountsFollowNodes(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		for _, c := range []string{"/c1", "/c2"} {
			got, err := NodeCounts(ctx, db.Q(), c)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := db.Q().QueryContext(ctx, `SELECT state, count(*) FROM nodes WHERE compute = ? GROUP BY state`, Key(c))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			for rows.Next() {
				var s string
				var n int
				rows.Scan(&s, &n)
				want[s] = n
			}
			rows.Close()
			if len(got) != len(want) {
				t.Errorf("%s: %s counts %v; nodes say %v", when, c, got, want)
			}
			for s, n := range want {
				if got[s] != n {
					t.Errorf("%s: %s counts %v; nodes say %v", when, c, got, want)
				}
			}
		}
	}
	put := func(id, compute, state string) {
		t.Helper()
		if err := PutNode(ctx, db.W(), Node{ID: id, Compute: compute, State: state, Created: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		put(fmt.Sprintf("a%d", i), "/c1", api.NodePreparing)
	}
	put("b0", "/c2", api.NodeIdle)
	check("after inserts")
	put("a0", "/c1", api.NodeIdle)
	put("a1", "/c1", api.NodeIdle)
	put("a1", "/c1", api.NodeIdle) // same state again
	if ok, err := ClaimIdleNodes(ctx, db.W(), []string{"a0"}, "job-1"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	check("after state changes")
	if err := DeleteNode(ctx, db.W(), "a2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := DeleteNode(ctx, db.W(), "b0", time.Now()); err != nil {
		t.Fatal(err)
	}
	check("after deletes")
	if got, _ := NodeCounts(ctx, db.Q(), "/c2"); len(got) != 0 {
		t.Errorf("a compute without nodes counts %v", got)
	}
}

// The node cache gives what NodesOf gives, through changes and deletions.
func TestNodesOfCachedMatchesNodesOf(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	cache := NewNodeCache()
	same := func(when string) {
		t.Helper()
		want, err := NodesOf(ctx, db.Q(), "/c1")
		if err != nil {
			t.Fatal(err)
		}
		got, err := NodesOfCached(ctx, db.Q(), "/c1", cache)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: cached %v; want %v", when, got, want)
		}
	}
	for i := 0; i < 3; i++ {
		PutNode(ctx, db.W(), Node{ID: fmt.Sprintf("n%d", i), Compute: "/c1", State: api.NodeIdle, Created: time.Unix(int64(i), 0)})
	}
	same("first read")
	same("unchanged")
	PutNode(ctx, db.W(), Node{ID: "n1", Compute: "/c1", State: api.NodeRunning, JobID: "j", Created: time.Unix(1, 0)})
	DeleteNode(ctx, db.W(), "n2", time.Now())
	same("after a change and a delete")
	if len(cache.byID["/c1"]) != 2 {
		t.Errorf("the cache keeps %d entries; want the 2 nodes left", len(cache.byID["/c1"]))
	}
}

// SubmittedAfter and RecentJobs read one compute's jobs in submission
// order, whatever their status.
func TestSubmittedAfterAndRecentJobs(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	var seqs []int64
	for i := range 5 {
		j := queuedJob(fmt.Sprintf("u%d", i), fmt.Sprintf("j%d", i), int32(i), 0, "", "")
		j.Created = time.Unix(int64(100+i), 0)
		if i == 2 {
			j.Compute = "/other"
		}
		if i == 3 {
			j.Doc.Properties.Status = api.JobCompleted
		}
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, j.Seq)
	}
	subs, err := SubmittedAfter(ctx, db.Q(), "/C", seqs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []Submission{{seqs[1], 1, time.Unix(101, 0).UTC()}, {seqs[3], 3, time.Unix(103, 0).UTC()}, {seqs[4], 4, time.Unix(104, 0).UTC()}}
	if len(subs) != len(want) || subs[0] != want[0] || subs[1] != want[1] || subs[2] != want[2] {
		t.Errorf("SubmittedAfter = %+v; want %+v", subs, want)
	}
	jobs, err := RecentJobs(ctx, db.Q(), "/c", 2)
	if err != nil || len(jobs) != 2 || jobs[0].UID != "u3" || jobs[1].UID != "u4" || jobs[0].Doc.Properties.Status != api.JobCompleted {
		t.Errorf("RecentJobs(2) = %d jobs, %v; want u3, u4", len(jobs), err)
	}
	if jobs, err := RecentJobs(ctx, db.Q(), "/c", 100); err != nil || len(jobs) != 4 || jobs[0].UID != "u0" {
		t.Errorf("RecentJobs(100) = %d jobs, %v; want the compute's 4", len(jobs), err)
	}
	if jobs, err := RecentJobs(ctx, db.Q(), "/none", 10); err != nil || len(jobs) != 0 {
		t.Errorf("RecentJobs of a compute without jobs = %d, %v", len(jobs), err)
	}
}

// ActiveJobs lists the jobs of a compute between assignment and end with
// their node counts, from the columns, and the run state a job carries
// beside its document (port restarts, mpirun's end) survives a write.
func TestActiveJobs(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	statuses := []string{api.JobQueued, api.JobPreparing, api.JobStarting, api.JobRunning, api.JobFinalizing,
		api.JobCancelRequested, api.JobCompleted, api.JobFailed, api.JobCanceled}
	for i, st := range statuses {
		j := queuedJob(fmt.Sprintf("u%d", i), fmt.Sprintf("j%d", i), int32(i+1), 0, "", "")
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
		j.Doc.Properties.Status = st
		j.PortRetries, j.MPIDone = i, i%2 == 0
		if err := UpdateJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	other := queuedJob("elsewhere", "elsewhere", 2, 0, "", "")
	other.Compute = "/other"
	if err := InsertJob(ctx, db.W(), other); err != nil {
		t.Fatal(err)
	}
	got, err := ActiveJobs(ctx, db.Q(), "/c")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"u1": 2, "u2": 3, "u3": 4, "u4": 5, "u5": 6}
	if len(got) != len(want) {
		t.Fatalf("active jobs = %+v; want %v", got, want)
	}
	for _, a := range got {
		if want[a.UID] != a.Nodes {
			t.Errorf("active job %+v; want %d nodes", a, want[a.UID])
		}
	}
	j, err := GetJobByUID(ctx, db.Q(), "u4")
	if err != nil {
		t.Fatal(err)
	}
	if j.PortRetries != 4 || !j.MPIDone {
		t.Errorf("read back port retries %d, mpirun done %v; want 4, true", j.PortRetries, j.MPIDone)
	}
}
