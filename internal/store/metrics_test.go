package store

import (
	"context"
	"errors"
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
