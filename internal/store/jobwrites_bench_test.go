package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// BenchmarkJobWrites is what a one-node job's writes of its status and
// its node's state cost the writer, each in transactions as the
// scheduler and the agents' reports write them: placed with 100 others
// in one pass (queued → preparing, the node claimed), then ended alone
// (preparing → completed, the node idle again). Per job.
//
//	go test ./internal/store/ -run '^$' -bench JobWrites -count 6
func BenchmarkJobWrites(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	const pass = 100
	for i := range pass {
		n := Node{ID: fmt.Sprintf("n%d", i), Compute: "/c", State: api.NodeIdle, Created: time.Unix(1, 0)}
		if err := PutNode(ctx, db.W(), n); err != nil {
			b.Fatal(err)
		}
	}
	seq := 0
	var placing, ending time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		jobs := make([]*Job, pass)
		err := db.Tx(ctx, func(q Querier) error {
			for i := range jobs {
				seq++
				jobs[i] = queuedJob(fmt.Sprintf("u%d", seq), fmt.Sprintf("j%d", seq), 1, 0, "", "")
				if err := InsertJob(ctx, q, jobs[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		err = db.Tx(ctx, func(q Querier) error {
			for i, j := range jobs {
				if ok, err := ClaimIdleNodes(ctx, q, []string{fmt.Sprintf("n%d", i)}, j.UID); err != nil || !ok {
					return fmt.Errorf("claim: %v, %w", ok, err)
				}
				j.Doc.Properties.Status = api.JobPreparing
				if err := UpdateJob(ctx, q, j); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		placing += time.Since(start)
		start = time.Now()
		for i, j := range jobs {
			err := db.Tx(ctx, func(q Querier) error {
				n, err := GetNode(ctx, q, fmt.Sprintf("n%d", i))
				if err != nil {
					return err
				}
				j.Doc.Properties.Status = api.JobCompleted
				if err := UpdateJob(ctx, q, j); err != nil {
					return err
				}
				n.State, n.JobID, n.IdleSince = api.NodeIdle, "", time.Unix(2, 0)
				return PutNode(ctx, q, n)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		ending += time.Since(start)
	}
	b.ReportMetric(float64(placing.Microseconds())/float64(b.N*pass), "placing-us/job")
	b.ReportMetric(float64(ending.Microseconds())/float64(b.N*pass), "ending-us/job")
}
