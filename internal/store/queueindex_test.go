package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A job leaves the queue's reads once placed and comes back when it is
// queued again: the queue indexes hold queued jobs only, and follow a
// job's status both ways.
func TestQueueReadsFollowTheStatus(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	a, b := inGroup(queuedJob("a", "a", 1, 0, "", ""), "alice"), inGroup(queuedJob("b", "b", 2, 0, "", ""), "bob")
	for _, j := range []*Job{a, b} {
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	queued := func() (head, byGroup []string, counts map[string]GroupQueue) {
		t.Helper()
		h, err := QueuedJobs(ctx, db.Q(), "/c", 10)
		if err != nil {
			t.Fatal(err)
		}
		g, err := QueuedJobsByGroup(ctx, db.Q(), "/c", 10)
		if err != nil {
			t.Fatal(err)
		}
		c, err := QueuedByGroup(ctx, db.Q(), "/c")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range h {
			head = append(head, j.UID)
		}
		for _, j := range g {
			byGroup = append(byGroup, j.UID)
		}
		return head, byGroup, c
	}
	a.Doc.SetStatus(api.JobPreparing, time.Unix(2, 0), "")
	if err := UpdateJob(ctx, db.W(), a); err != nil {
		t.Fatal(err)
	}
	head, byGroup, counts := queued()
	if !slices.Equal(head, []string{"b"}) || !slices.Equal(byGroup, []string{"b"}) || len(counts) != 1 || counts["bob"] != (GroupQueue{Jobs: 1, Nodes: 2}) {
		t.Fatalf("with a placed: head %v, by group %v, counts %v; want b alone", head, byGroup, counts)
	}
	a.Doc.SetStatus(api.JobQueued, time.Unix(3, 0), "requeued")
	if err := UpdateJob(ctx, db.W(), a); err != nil {
		t.Fatal(err)
	}
	head, byGroup, counts = queued()
	if !slices.Equal(head, []string{"a", "b"}) || !slices.Equal(byGroup, []string{"a", "b"}) || counts["alice"] != (GroupQueue{Jobs: 1, Nodes: 1}) {
		t.Fatalf("with a requeued: head %v, by group %v, counts %v; want a then b", head, byGroup, counts)
	}
}

// Each read of the queue goes through an index of queued jobs, never a
// scan of every job a compute ran, and the head needs no sort: a query
// that bound the status instead of naming it would lose the index.
func TestQueueReadsUseTheQueueIndexes(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	reads := []struct {
		name, query, index string
		args               []any
	}{
		{"queue head", queueHead, "jobs_queued", []any{"/c", 10}},
		{"a group's queue head", groupQueueHead, "jobs_share_queued", []any{"/c", "alice", 10}},
		{"groups with queued jobs", queuedGroupsQuery, "jobs_share_queued", []any{"/c", "/c"}},
		{"queued jobs by group", queuedByGroupQuery, "jobs_share_queued", []any{"/c"}},
	}
	for _, r := range reads {
		plan := explain(t, ctx, db, r.query, r.args...)
		if !strings.Contains(plan, r.index) {
			t.Errorf("%s: plan %q does not use %s", r.name, plan, r.index)
		}
		if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "Sort") {
			t.Errorf("%s: plan %q sorts", r.name, plan)
		}
	}
}

// explain returns a query's plan on the store's engine, one line per step.
// PostgreSQL is told not to scan tables, which it would for a few rows.
func explain(t *testing.T, ctx context.Context, db *DB, query string, args ...any) string {
	t.Helper()
	var lines []string
	err := db.Tx(ctx, func(q Querier) error {
		lines = nil
		prefix := "EXPLAIN QUERY PLAN "
		if db.Engine() == "postgres" {
			if _, err := q.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			prefix = "EXPLAIN "
		}
		rows, err := q.QueryContext(ctx, prefix+query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			if s, ok := vals[len(vals)-1].(string); ok {
				lines = append(lines, s)
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("explain %q: %v", query, err)
	}
	return strings.Join(lines, "\n")
}
