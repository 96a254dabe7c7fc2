package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A page read through the cache shows what the store holds: a job changed
// since the last read is read again, a new job appears, and the page is
// the one ListJobs gives.
func TestListJobsCachedFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for i := range 5 {
		if err := InsertJob(ctx, db.W(), queuedJob(fmt.Sprintf("u%d", i), fmt.Sprintf("job-%d", i), 1, 0, "", "")); err != nil {
			t.Fatal(err)
		}
	}
	c := NewJobCache()
	page := func() []Job {
		t.Helper()
		got, err := ListJobsCached(ctx, db.Q(), c, "/ws", "", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ListJobs(ctx, db.Q(), "/ws", "", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("cached page has %d jobs, the store %d", len(got), len(want))
		}
		for i := range got {
			if got[i].UID != want[i].UID || got[i].Version != want[i].Version || got[i].Doc.Properties.Status != want[i].Doc.Properties.Status {
				t.Fatalf("cached page differs at %d: %s v%d %s, store %s v%d %s", i,
					got[i].UID, got[i].Version, got[i].Doc.Properties.Status, want[i].UID, want[i].Version, want[i].Doc.Properties.Status)
			}
		}
		return got
	}
	page()
	j, err := GetJobByUID(ctx, db.Q(), "u2")
	if err != nil {
		t.Fatal(err)
	}
	j.Doc.Properties.Status = api.JobCanceled
	if err := UpdateJob(ctx, db.W(), &j); err != nil {
		t.Fatal(err)
	}
	if got := page(); got[2].Doc.Properties.Status != api.JobCanceled {
		t.Fatalf("job-2 after its cancel reads %s through the cache", got[2].Doc.Properties.Status)
	}
	if err := InsertJob(ctx, db.W(), queuedJob("u9", "job-9", 1, 0, "", "")); err != nil {
		t.Fatal(err)
	}
	if got := page(); len(got) != 6 {
		t.Fatalf("the page has %d jobs after a sixth was submitted", len(got))
	}
}

// The cache forgets jobs past its size instead of growing with the
// history.
func TestJobCacheIsBounded(t *testing.T) {
	c := &JobCache{max: 4, by: map[string]cachedJob{}}
	for i := range 20 {
		c.put(Job{UID: fmt.Sprint(i)}, "{}")
		if len(c.by) > 4 {
			t.Fatalf("%d jobs cached, at most 4", len(c.by))
		}
	}
	if _, ok := c.get("19", []byte("{}")); !ok {
		t.Fatal("the job put last is not cached")
	}
	if _, ok := c.get("19", []byte(`{"changed":1}`)); ok {
		t.Fatal("a job whose stored body changed came from the cache")
	}
}
