package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const evCompute = "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/computes/CPU"

func eventTypes(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Node)
	}
	return out
}

// A node's life, written through PutNode and DeleteNode, is its history:
// requested, ready (with allocation and boot time), idle after its job,
// unusable with the reason, removed with its lifetime. Running (the
// job's history tells) and rewrites without a change add nothing.
func TestNodeLifeIsItsHistory(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	n := Node{ID: "n1", Compute: evCompute, State: api.NodePreparing, Priority: "Dedicated", VMSize: "STANDARD_DS3_V2", Provider: "local", Created: t0}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(PutNode(ctx, db.W(), n))
	n.ProviderID, n.Allocated = "p1", t0.Add(3*time.Second)
	must(PutNode(ctx, db.W(), n)) // no change of state: no event
	n.State, n.Ready, n.IdleSince = api.NodeIdle, t0.Add(45*time.Second), t0.Add(45*time.Second)
	must(PutNode(ctx, db.W(), n))
	n.State, n.JobID = api.NodeRunning, "job-1"
	must(PutNode(ctx, db.W(), n))
	n.State, n.JobID, n.IdleSince = api.NodeIdle, "", t0.Add(2*time.Minute)
	must(PutNode(ctx, db.W(), n))
	n.State, n.Reason, n.Changed = api.NodeUnusable, "no heartbeat for 3m0s", t0.Add(6*time.Minute)
	must(PutNode(ctx, db.W(), n))
	must(db.Tx(ctx, func(q Querier) error { return DeleteNode(ctx, q, "n1", t0.Add(7*time.Minute)) }))
	must(DeleteNode(ctx, db.W(), "n1", t0.Add(8*time.Minute))) // gone already: nothing more

	evs, err := Events(ctx, db.Q(), EventFilter{Compute: evCompute})
	must(err)
	got := eventTypes(evs)
	want := []string{"NodeRemoved n1", "NodeUnusable n1", "NodeIdle n1", "NodeReady n1", "NodeRequested n1"}
	if !slices.Equal(got, want) {
		t.Fatalf("events newest first = %v, want %v", got, want)
	}
	ready := evs[3]
	if !ready.Time.Equal(t0.Add(45*time.Second)) || ready.AllocationSeconds == nil || *ready.AllocationSeconds != 3 ||
		ready.BootSeconds == nil || *ready.BootSeconds != 42 || *ready.DurationSeconds != 45 {
		t.Errorf("ready event = %+v, want at +45s with allocation 3 s and boot 42 s", ready)
	}
	if ready.Message != "ready 45s after it was requested (allocation 3s, boot 42s)" {
		t.Errorf("ready message = %q", ready.Message)
	}
	if u := evs[1]; !u.Time.Equal(t0.Add(6*time.Minute)) || u.Reason != "no heartbeat for 3m0s" || u.From != api.NodeIdle {
		t.Errorf("unusable event = %+v", u)
	}
	if r := evs[0]; *r.DurationSeconds != 420 || r.From != api.NodeUnusable {
		t.Errorf("removed event = %+v, want a 7-minute life", r)
	}

	// The compute's key is its id in any case.
	lower, err := Events(ctx, db.Q(), EventFilter{Compute: "/SUBSCRIPTIONS/s/resourcegroups/g/providers/microsoft.machinelearningservices/workspaces/w/computes/cpu"})
	must(err)
	if len(lower) != len(evs) {
		t.Errorf("events by the id in another case: %d, want %d", len(lower), len(evs))
	}
}

// An event is written in the transaction of its change: a rolled back
// change leaves no event.
func TestEventOfARolledBackChangeIsGone(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := db.Tx(ctx, func(q Querier) error {
		if err := PutNode(ctx, q, Node{ID: "n1", Compute: evCompute, State: api.NodePreparing, Created: time.Now()}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	evs, err := Events(ctx, db.Q(), EventFilter{Compute: evCompute})
	if err != nil || len(evs) != 0 {
		t.Fatalf("events after a rollback = %v, %v; want none", eventTypes(evs), err)
	}
}

// Filters by node, type (any case) and time; pages go back in time with
// Before; DeleteEventsBefore removes old events in batches.
func TestEventFiltersPagesAndRetention(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		e := Event{Compute: evCompute, Node: []string{"a", "b"}[i%2], Type: []string{api.EventNodeRequested, api.EventNodeIdle}[i%2], Time: t0.Add(time.Duration(i) * time.Hour)}
		if err := AddEvent(ctx, db.W(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := AddEvent(ctx, db.W(), Event{Compute: evCompute + "-other", Type: api.EventNodeIdle, Time: t0}); err != nil {
		t.Fatal(err)
	}
	count := func(f EventFilter) int {
		t.Helper()
		f.Compute = evCompute
		evs, err := Events(ctx, db.Q(), f)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if n := count(EventFilter{}); n != 10 {
		t.Errorf("all = %d, want 10 (not the other compute's)", n)
	}
	if n := count(EventFilter{Node: "a"}); n != 5 {
		t.Errorf("node a = %d, want 5", n)
	}
	if n := count(EventFilter{Types: []string{"nodeidle"}}); n != 5 {
		t.Errorf("type nodeidle = %d, want 5", n)
	}
	if n := count(EventFilter{Since: t0.Add(2 * time.Hour), Until: t0.Add(5 * time.Hour)}); n != 3 {
		t.Errorf("hours 2..5 = %d, want 3", n)
	}
	first, err := Events(ctx, db.Q(), EventFilter{Compute: evCompute, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	next, err := Events(ctx, db.Q(), EventFilter{Compute: evCompute, Limit: 4, Before: first[3].Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !first[0].Time.Equal(t0.Add(9*time.Hour)) || !next[0].Time.Equal(t0.Add(5*time.Hour)) {
		t.Errorf("pages start at %v and %v, want hours 9 and 5", first[0].Time, next[0].Time)
	}
	n, err := DeleteEventsBefore(ctx, db.W(), t0.Add(4*time.Hour), 3)
	if err != nil || n != 3 {
		t.Fatalf("first batch removed %d (%v), want 3", n, err)
	}
	n, err = DeleteEventsBefore(ctx, db.W(), t0.Add(4*time.Hour), 3)
	if err != nil || n != 2 {
		t.Fatalf("second batch removed %d (%v), want 2 (hours 3 and the other compute's)", n, err)
	}
	if n := count(EventFilter{}); n != 6 {
		t.Errorf("left = %d, want 6", n)
	}
}
