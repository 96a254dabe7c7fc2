package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// BenchmarkPassPlaces5000: the cluster controller alone, no agents and no
// HTTP: 5,000 idle nodes, 100,000 queued one-node jobs in SQLite, one pass
// (read the queue from the index, decide, write the 5,000 assignments in
// one transaction). The placement rate this gives is the ceiling of the
// end-to-end figure of test/scale, whose agents share the 2 cores.
//
//	go test ./internal/controller/ -run '^$' -bench PassPlaces5000 -benchtime 3x
func BenchmarkPassPlaces5000(b *testing.B) {
	const nodes, jobs = 5000, 100000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b)
		c := h.compute("big", nodes, nodes, "PT1H")
		h.pass()
		h.register(c)
		err := h.db.Tx(h.ctx, func(q store.Querier) error {
			for k := 0; k < jobs; k++ {
				j := store.Job{UID: fmt.Sprintf("j%d", k), Parent: h.sc.WorkspaceID(), Compute: c.ID, Created: h.clk.Now(),
					Doc: api.Job{Name: fmt.Sprintf("j%d", k), Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "true", ComputeID: c.ID}}}
				j.Doc.SetStatus(api.JobQueued, h.clk.Now(), "")
				if err := store.InsertJob(h.ctx, q, &j); err != nil {
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
		h.pass()
		total += time.Since(start)
		b.StopTimer()
		if n, err := store.CountJobs(h.ctx, h.db.Q(), c.ID, api.JobPreparing); err != nil || n != nodes {
			b.Fatalf("%d jobs placed (%v); want %d", n, err, nodes)
		}
	}
	b.ReportMetric(float64(nodes*b.N)/total.Seconds(), "placed/s")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/pass")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkGangCheck5000: the check that every job given nodes still holds
// them (checkGangs), on 5,000 nodes each running a job of its own — the
// work it adds to every pass of a full cluster — beside the whole pass.
//
//	go test ./internal/controller/ -run '^$' -bench GangCheck5000 -benchtime 20x
func BenchmarkGangCheck5000(b *testing.B) {
	const nodes = 5000
	h := newHarness(b)
	c := h.compute("big", nodes, nodes, "PT1H")
	h.pass()
	h.register(c)
	err := h.db.Tx(h.ctx, func(q store.Querier) error {
		for k := 0; k < nodes; k++ {
			j := store.Job{UID: fmt.Sprintf("j%d", k), Parent: h.sc.WorkspaceID(), Compute: c.ID, Created: h.clk.Now(),
				Doc: api.Job{Name: fmt.Sprintf("j%d", k), Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "true", ComputeID: c.ID}}}
			j.Doc.SetStatus(api.JobQueued, h.clk.Now(), "")
			if err := store.InsertJob(h.ctx, q, &j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	h.pass() // every job placed
	if n, err := store.CountJobs(h.ctx, h.db.Q(), c.ID, api.JobPreparing); err != nil || n != nodes {
		b.Fatalf("%d jobs placed (%v); want %d", n, err, nodes)
	}
	ns := h.nodes(c)
	var check, pass time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if changed, err := h.c.checkGangs(h.ctx, c.ID, ns, h.clk.Now()); err != nil || changed {
			b.Fatalf("checkGangs changed %v (%v) on a healthy cluster", changed, err)
		}
		check += time.Since(start)
		h.heartbeat(c)
		start = time.Now()
		h.pass()
		pass += time.Since(start)
	}
	b.ReportMetric(float64(check.Microseconds())/1000/float64(b.N), "check-ms")
	b.ReportMetric(float64(pass.Microseconds())/1000/float64(b.N), "pass-ms")
	b.ReportMetric(0, "ns/op")
}
