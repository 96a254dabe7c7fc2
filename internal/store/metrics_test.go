package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestJobMetrics: values are kept per step, a retried value is stored
// once, the latest is MLflow's (highest step, then latest time), params
// are immutable, tags are replaced, and all of it goes with the job.
func TestJobMetrics(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	j := queuedJob("u1", "j1", 1, 0, "", "")
	if err := InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	ms := []Metric{
		{Name: "acc", Value: 0.5, Step: 0, Time: t0},
		{Name: "acc", Value: 0.7, Step: 2, Time: t0.Add(2 * time.Second)},
		{Name: "acc", Value: 0.6, Step: 1, Time: t0.Add(3 * time.Second)},
		{Name: "loss", Value: 2, Step: 0, Time: t0},
		{Name: "loss", Value: 1, Step: 0, Time: t0.Add(time.Second)},
	}
	for range 2 { // the second time is a retry
		if err := PutMetrics(ctx, db.W(), "u1", ms); err != nil {
			t.Fatal(err)
		}
	}
	all, err := Metrics(ctx, db.Q(), "u1", "")
	if err != nil || len(all) != 5 {
		t.Fatalf("metrics: %+v %v", all, err)
	}
	acc, err := Metrics(ctx, db.Q(), "u1", "acc")
	if err != nil || len(acc) != 3 || acc[1].Step != 1 || acc[2].Value != 0.7 {
		t.Fatalf("acc: %+v %v", acc, err)
	}
	latest, err := LatestMetrics(ctx, db.Q(), "u1")
	if err != nil || len(latest) != 2 || latest[0].Value != 0.7 || latest[1].Value != 1 || !latest[1].Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	if err := PutParams(ctx, db.W(), "u1", []RunValue{{"lr", "0.1"}, {"lr", "0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := PutParams(ctx, db.W(), "u1", []RunValue{{"lr", "0.2"}}); !errors.Is(err, ErrParamChanged) {
		t.Fatalf("changed param: %v", err)
	}
	if err := PutTags(ctx, db.W(), "u1", []RunValue{{"t", "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := PutTags(ctx, db.W(), "u1", []RunValue{{"t", "b"}}); err != nil {
		t.Fatal(err)
	}
	params, tags, err := RunData(ctx, db.Q(), "u1")
	if err != nil || len(params) != 1 || params[0].Value != "0.1" || len(tags) != 1 || tags[0].Value != "b" {
		t.Fatalf("run data: %+v %+v %v", params, tags, err)
	}
	// A job keeps at most MaxMetricValues values; the call past it stores
	// none of its values.
	defer func(n int) { MaxMetricValues = n }(MaxMetricValues)
	MaxMetricValues = 6
	err = db.Tx(ctx, func(q Querier) error {
		return PutMetrics(ctx, q, "u1", []Metric{{Name: "x", Value: 1, Time: t0}, {Name: "x", Value: 2, Time: t0}})
	})
	if !errors.Is(err, ErrMetricLimit) {
		t.Fatalf("past the limit: %v", err)
	}
	if err := PutMetrics(ctx, db.W(), "u1", []Metric{{Name: "x", Value: 1, Time: t0}, ms[0]}); err != nil {
		t.Fatalf("up to the limit: %v", err)
	}
	if all, _ := Metrics(ctx, db.Q(), "u1", ""); len(all) != 6 {
		t.Fatalf("%d values stored, want 6", len(all))
	}
	if err := DeleteJob(ctx, db.W(), "u1"); err != nil {
		t.Fatal(err)
	}
	all, _ = Metrics(ctx, db.Q(), "u1", "")
	params, tags, _ = RunData(ctx, db.Q(), "u1")
	if len(all)+len(params)+len(tags) != 0 {
		t.Fatalf("after delete: %v %v %v", all, params, tags)
	}
}

// TestRunDataCounted: every job's params, tags and metric values are
// counted in bytes (a replaced tag by its new value), a workspace's total
// adds its jobs' and goes down with a deleted job, and past MaxParams or
// MaxTags a call is ErrRunLimit.
func TestRunDataCounted(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	for _, uid := range []string{"u1", "u2"} {
		if err := InsertJob(ctx, db.W(), queuedJob(uid, "j-"+uid, 1, 0, "", "")); err != nil {
			t.Fatal(err)
		}
	}
	other := queuedJob("u3", "j-u3", 1, 0, "", "")
	other.Parent = "/ws2"
	if err := InsertJob(ctx, db.W(), other); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(PutParams(ctx, db.W(), "u1", []RunValue{{"lr", "0.1"}, {"lr", "0.1"}}))      // 5
	must(PutTags(ctx, db.W(), "u1", []RunValue{{"stage", "dev"}}))                    // 8
	must(PutTags(ctx, db.W(), "u1", []RunValue{{"stage", "prod"}}))                   // +1
	must(PutMetrics(ctx, db.W(), "u1", []Metric{{Name: "loss", Value: 1, Time: t0}})) // 4+24
	must(PutMetrics(ctx, db.W(), "u1", []Metric{{Name: "loss", Value: 1, Time: t0}})) // a retry: 0
	must(PutTags(ctx, db.W(), "u2", []RunValue{{"t", "xyz"}}))                        // 4
	must(PutTags(ctx, db.W(), "u3", []RunValue{{"t", strings.Repeat("z", 1000)}}))    // another workspace
	if n, err := RunBytes(ctx, db.Q(), "u1"); err != nil || n != 5+9+28 {
		t.Errorf("RunBytes(u1) = %d %v, want %d", n, err, 5+9+28)
	}
	if n, err := WorkspaceRunBytes(ctx, db.Q(), "/WS"); err != nil || n != 42+4 {
		t.Errorf("WorkspaceRunBytes = %d %v, want 46", n, err)
	}
	must(DeleteJob(ctx, db.W(), "u1"))
	if n, err := WorkspaceRunBytes(ctx, db.Q(), "/ws"); err != nil || n != 4 {
		t.Errorf("WorkspaceRunBytes after a deletion = %d %v, want 4", n, err)
	}

	defer func(p, tg int) { MaxParams, MaxTags = p, tg }(MaxParams, MaxTags)
	MaxParams, MaxTags = 2, 2
	err := db.Tx(ctx, func(q Querier) error { return PutParams(ctx, q, "u2", []RunValue{{"a", "1"}, {"b", "2"}, {"c", "3"}}) })
	if !errors.Is(err, ErrRunLimit) {
		t.Errorf("params past MaxParams: %v", err)
	}
	if err := PutTags(ctx, db.W(), "u2", []RunValue{{"t", "again"}, {"u", "1"}}); err != nil {
		t.Errorf("tags up to MaxTags: %v", err)
	}
	if err := PutTags(ctx, db.W(), "u2", []RunValue{{"v", "1"}}); !errors.Is(err, ErrRunLimit) {
		t.Errorf("tags past MaxTags: %v", err)
	}
}

// A workspace's blobs add up, but for the one being uploaded again.
func TestWorkspaceBlobBytes(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	for _, o := range []BlobOwner{{Digest: "a", Workspace: "/WS", Size: 10, Uploaded: now}, {Digest: "b", Workspace: "/ws", Size: 20, Uploaded: now},
		{Digest: "a", Workspace: "/ws2", Size: 10, Uploaded: now}} {
		if err := PutBlobOwner(ctx, db.W(), o); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := WorkspaceBlobBytes(ctx, db.Q(), "/ws", ""); err != nil || n != 30 {
		t.Errorf("WorkspaceBlobBytes = %d %v, want 30", n, err)
	}
	if n, err := WorkspaceBlobBytes(ctx, db.Q(), "/ws", "b"); err != nil || n != 10 {
		t.Errorf("WorkspaceBlobBytes but b = %d %v, want 10", n, err)
	}
	if n, err := WorkspaceBlobBytes(ctx, db.Q(), "/nobody", ""); err != nil || n != 0 {
		t.Errorf("WorkspaceBlobBytes of none = %d %v, want 0", n, err)
	}
}
