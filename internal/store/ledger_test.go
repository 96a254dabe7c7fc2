package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The ledger keeps a node's life past its record, and each attempt of a
// job from its assignment to its end (a requeue ends the attempt, a new
// assignment starts the next), past the job's record too.
func TestLedgerOutlivesNodesAndJobs(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	tx := func(fn func(q Querier) error) {
		t.Helper()
		if err := db.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	n := Node{ID: "n1", Compute: evCompute, State: api.NodePreparing, VMSize: "Standard_DS3_v2", Priority: "Dedicated", Created: at(0)}
	tx(func(q Querier) error { return PutNode(ctx, q, n) })
	n.State, n.Ready, n.IdleSince = api.NodeIdle, at(1), at(1)
	tx(func(q Querier) error { return PutNode(ctx, q, n) })

	j := queuedJob("u1", "train", 1, 0, "", "")
	j.Compute = evCompute
	tx(func(q Querier) error { return InsertJob(ctx, q, j) })
	step := func(edit func(p *api.JobProperties)) {
		t.Helper()
		tx(func(q Querier) error {
			cur, err := GetJobByUID(ctx, q, "u1")
			if err != nil {
				return err
			}
			edit(&cur.Doc.Properties)
			return UpdateJob(ctx, q, &cur)
		})
	}
	step(func(p *api.JobProperties) {
		p.Attempts = append(p.Attempts, api.Attempt{Number: 1, Nodes: []string{"n1"}, Assigned: ptr(at(2))})
		p.Status = api.JobPreparing
	})
	step(func(p *api.JobProperties) { p.Attempts[0].Started, p.Status = ptr(at(3)), api.JobRunning }) // no change to the ledger
	step(func(p *api.JobProperties) { p.Attempts[0].Ended, p.Status = ptr(at(10)), api.JobQueued })   // requeued
	step(func(p *api.JobProperties) {
		p.Attempts = append(p.Attempts, api.Attempt{Number: 2, Nodes: []string{"n1"}, Assigned: ptr(at(12))})
		p.Status = api.JobPreparing
	})
	step(func(p *api.JobProperties) {
		p.Status, p.EndTime = api.JobFailed, ptr(at(20)) // ended with the job, no attempt end recorded
	})
	tx(func(q Querier) error { return DeleteJob(ctx, q, "u1") })
	tx(func(q Querier) error { return DeleteNode(ctx, q, "n1", at(30)) })

	bills, err := NodeBills(ctx, db.Q(), t0, at(60))
	if err != nil || len(bills) != 1 || !bills[0].Created.Equal(at(0)) || !bills[0].Removed.Equal(at(30)) || bills[0].VMSize != "Standard_DS3_v2" {
		t.Fatalf("node bills = %+v, %v; want n1 from 10:00 to 10:30", bills, err)
	}
	runs, err := JobRuns(ctx, db.Q(), t0, at(60))
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs = %+v, %v; want two attempts", runs, err)
	}
	if r := runs[0]; r.Attempt != 1 || !r.Started.Equal(at(2)) || !r.Ended.Equal(at(10)) || r.Name != "train" || !slices.Equal(r.Nodes, []string{"n1"}) {
		t.Errorf("attempt 1 = %+v, want 10:02–10:10 on n1", r)
	}
	if r := runs[1]; r.Attempt != 2 || !r.Started.Equal(at(12)) || !r.Ended.Equal(at(20)) {
		t.Errorf("attempt 2 = %+v, want 10:12 until the job failed at 10:20", r)
	}
	if later, _ := NodeBills(ctx, db.Q(), at(30), at(60)); len(later) != 0 {
		t.Errorf("bills after the node's removal = %+v, want none", later)
	}
	if later, _ := JobRuns(ctx, db.Q(), at(20), at(60)); len(later) != 0 {
		t.Errorf("runs after the job ended = %+v, want none", later)
	}
}

func ptr[T any](v T) *T { return &v }
