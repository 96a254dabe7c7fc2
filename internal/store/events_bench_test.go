package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// BenchmarkNodeRelease is what the history adds to a node's release after
// its job (running → idle): the read of the state it replaces and the
// NodeIdle event, in one transaction.
func BenchmarkNodeRelease(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	n := Node{ID: "n1", Compute: evCompute, State: api.NodeIdle, Created: time.Now()}
	if err := PutNode(ctx, db.W(), n); err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		n.State, n.JobID = api.NodeRunning, "j"
		if i%2 == 0 {
			n.State, n.JobID, n.IdleSince = api.NodeIdle, "", time.Now()
		}
		if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkComputeEventsPage reads the newest page of 100 events of one
// compute, and a filtered page, among a million events of 100 computes.
func BenchmarkComputeEventsPage(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	const total, computes = 1_000_000, 100
	t0 := time.Now().Add(-30 * 24 * time.Hour)
	err := db.Tx(ctx, func(q Querier) error {
		for i := range total {
			e := Event{Compute: fmt.Sprintf("%s-%d", evCompute, i%computes), Node: fmt.Sprintf("n%d", i%1000),
				Type: api.EventTypes[i%len(api.EventTypes)], Time: t0.Add(time.Duration(i) * time.Second)}
			e.Message = "ready 48s after it was requested (allocation 3s, boot 45s)"
			if err := AddEvent(ctx, q, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name string
		f    EventFilter
	}{
		{"newest", EventFilter{Compute: evCompute + "-7"}},
		{"type", EventFilter{Compute: evCompute + "-7", Types: []string{api.EventNodeUnusable}}},
		{"node", EventFilter{Compute: evCompute + "-7", Node: "n7"}},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				evs, err := Events(ctx, db.Q(), f.f)
				if err != nil || len(evs) == 0 {
					b.Fatal(len(evs), err)
				}
			}
		})
	}
}
