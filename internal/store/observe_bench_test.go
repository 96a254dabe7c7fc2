package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// BenchmarkUpdateJobObserved is the cost an observer (the metrics) adds
// to a job write: telling it the status the write replaces (remembered
// from the read, looked up only for a job made without one).
func BenchmarkUpdateJobObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		b.Run(fmt.Sprintf("observed=%v", observed), func(b *testing.B) {
			db := openTest(b)
			ctx := context.Background()
			if observed {
				db.SetObserver(&recordingObserver{})
			}
			j := queuedJob("u1", "a", 1, 0, "", "")
			if err := InsertJob(ctx, db.W(), j); err != nil {
				b.Fatal(err)
			}
			statuses := []string{api.JobQueued, api.JobPreparing}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				j.Doc.Properties.Status = statuses[i%2]
				if err := db.Tx(ctx, func(q Querier) error { return UpdateJob(ctx, q, j) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
