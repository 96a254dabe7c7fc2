package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// inGroup puts a job in fair-share group g.
func inGroup(j *Job, g string) *Job {
	j.Doc.Properties.FairShareGroup = &g
	return j
}

// Each group's queue head comes in scheduling order, limited per group;
// the group column follows the document.
func TestQueuedJobsByGroup(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	jobs := []*Job{
		inGroup(queuedJob("a1", "a1", 1, 0, "", ""), "alice"),
		inGroup(queuedJob("a2", "a2", 2, 5, "", ""), "alice"),
		inGroup(queuedJob("a3", "a3", 1, 0, "", ""), "alice"),
		inGroup(queuedJob("b1", "b1", 1, 0, "", ""), "bob"),
		inGroup(queuedJob("n1", "n1", 1, 0, "", ""), ""),
	}
	for _, j := range jobs {
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	got, err := QueuedJobsByGroup(ctx, db.Q(), "/c", 2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range got {
		names = append(names, j.Group+":"+j.UID)
	}
	if want := []string{":n1", "alice:a2", "alice:a1", "bob:b1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("queue heads %v, want %v", names, want)
	}
	counts, err := QueuedByGroup(ctx, db.Q(), "/c")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]GroupQueue{"alice": {3, 4}, "bob": {1, 1}, "": {1, 1}}; !reflect.DeepEqual(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
	// A regrouped job moves.
	b := jobs[3]
	inGroup(b, "alice")
	if err := UpdateJob(ctx, db.W(), b); err != nil {
		t.Fatal(err)
	}
	if counts, _ = QueuedByGroup(ctx, db.Q(), "/c"); counts["alice"].Jobs != 4 || counts["bob"].Jobs != 0 {
		t.Errorf("after regrouping: %v", counts)
	}
}

// The jobs that hold nodes come with their group, when their attempt got
// its nodes and their own minimum runtime.
func TestRunningJobs(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := inGroup(queuedJob("r1", "r1", 2, 3, "", ""), "alice")
	r.Doc.Properties.MinRuntime = "PT30M"
	q := queuedJob("q1", "q1", 1, 0, "", "")
	for _, j := range []*Job{r, q} {
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	r.Doc.Properties.Attempts = []api.Attempt{{Number: 1, Assigned: &at}}
	r.Doc.SetStatus(api.JobRunning, at, "")
	if err := UpdateJob(ctx, db.W(), r); err != nil {
		t.Fatal(err)
	}
	got, err := RunningJobs(ctx, db.Q(), "/c")
	if err != nil {
		t.Fatal(err)
	}
	want := []RunningJob{{UID: "r1", Name: "r1", Group: "alice", Priority: 3, Seq: r.Seq, Nodes: 2, Started: at, MinRuntime: 30 * time.Minute}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("running %+v, want %+v", got, want)
	}
	// Its attempt ended: it holds nothing, and reads as not started.
	end := at.Add(time.Hour)
	r.Doc.Properties.Attempts[0].Ended = &end
	r.Doc.SetStatus(api.JobCompleted, end, "")
	if err := UpdateJob(ctx, db.W(), r); err != nil {
		t.Fatal(err)
	}
	if got, _ = RunningJobs(ctx, db.Q(), "/c"); len(got) != 0 {
		t.Errorf("after it ended: %+v", got)
	}
}

// A group's usage is kept per compute, replaced on each write and
// forgotten with the compute.
func TestShareUsage(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := PutShareUsage(ctx, db.W(), "/c", "alice", ShareUsage{Value: 7200.5, At: at, Held: 2}); err != nil {
		t.Fatal(err)
	}
	if err := PutShareUsage(ctx, db.W(), "/c", "alice", ShareUsage{Value: 9000, At: at.Add(time.Minute), Held: 3}); err != nil {
		t.Fatal(err)
	}
	if err := PutShareUsage(ctx, db.W(), "/other", "alice", ShareUsage{Value: 1, At: at, Held: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := ShareUsages(ctx, db.Q(), "/c")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]ShareUsage{"alice": {Value: 9000, At: at.Add(time.Minute), Held: 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	if err := DeleteShareUsage(ctx, db.W(), "/c"); err != nil {
		t.Fatal(err)
	}
	if got, _ = ShareUsages(ctx, db.Q(), "/c"); len(got) != 0 {
		t.Errorf("after delete: %v", got)
	}
	if got, _ = ShareUsages(ctx, db.Q(), "/other"); len(got) != 1 {
		t.Errorf("another compute's: %v", got)
	}
}
