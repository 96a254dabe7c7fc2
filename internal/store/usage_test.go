package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Samples read back by compute, node and job within a time range; a
// sample sent twice is stored once; the latest of each live node and
// running job is what metrics read; retention forgets old samples and
// the latest of nodes that are gone.
func TestUsageSamples(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const comp = "/subscriptions/s/resourcegroups/rg/providers/microsoft.machinelearningservices/workspaces/ws/computes/gpu"
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	for _, n := range []Node{
		{ID: "n1", Compute: comp, State: api.NodeRunning, JobID: "u1", Created: t0},
		{ID: "n2", Compute: comp, State: api.NodeIdle, Created: t0},
		{ID: "n3", Compute: comp, State: api.NodeUnusable, Created: t0},
	} {
		if err := PutNode(ctx, db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	j := queuedJob("u1", "train", 1, 0, "", "")
	j.Compute = comp
	j.Doc.Properties.Status = api.JobRunning
	if err := InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	put := func(rows ...UsageRow) {
		t.Helper()
		if err := db.Tx(ctx, func(q Querier) error { return PutUsage(ctx, q, rows) }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		at := t0.Add(time.Duration(i) * 15 * time.Second)
		v := UsageValues{CPU: float64(i) / 10, MemoryUsed: int64(i) << 30, MemoryTotal: 8 << 30, NetworkTx: int64(i), GPUs: fmt.Sprint(i)}
		put(UsageRow{Compute: comp, Node: "n1", Time: at, Body: fmt.Sprintf(`{"cpu":0.%d}`, i), Latest: v},
			UsageRow{Compute: comp, Node: "n1", Job: "u1", JobName: "train", Time: at, Body: fmt.Sprintf(`{"cpu":0.%d}`, i), Latest: v},
			UsageRow{Compute: comp, Node: "n2", Time: at, Body: `{}`},
			UsageRow{Compute: comp, Node: "n3", Time: at, Body: `{}`})
	}
	// Sent again through another replica, and an older one arriving late.
	put(UsageRow{Compute: comp, Node: "n1", Time: t0.Add(45 * time.Second), Body: `{"cpu":0.3}`},
		UsageRow{Compute: comp, Node: "n1", Time: t0.Add(-time.Second), Body: `{"late":true}`, Latest: UsageValues{CPU: 0.9}})

	all, err := UsageSamples(ctx, db.Q(), UsageQuery{Compute: comp})
	if err != nil || len(all) != 13 {
		t.Fatalf("compute samples: %d, %v; want 13 (4 per node and the late one)", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) {
			t.Fatalf("samples not oldest first: %v before %v", all[i-1].Time, all[i].Time)
		}
	}
	got, err := UsageSamples(ctx, db.Q(), UsageQuery{Compute: comp, Node: "n1", Since: t0.Add(15 * time.Second), Until: t0.Add(30 * time.Second)})
	if err != nil || len(got) != 2 || got[0].Body != `{"cpu":0.1}` || got[1].Body != `{"cpu":0.2}` {
		t.Fatalf("n1 in [15s, 30s]: %+v, %v", got, err)
	}
	got, err = UsageSamples(ctx, db.Q(), UsageQuery{Compute: comp, Job: "u1", Limit: 2})
	if err != nil || len(got) != 2 || got[1].Body != `{"cpu":0.3}` || got[0].Job != "u1" {
		t.Fatalf("the job's newest 2: %+v, %v", got, err)
	}

	latest, err := LatestUsages(ctx, db.Q())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]UsageValues{}
	for _, l := range latest {
		seen[l.Node+"/"+l.JobName] = l.UsageValues
	}
	last := UsageValues{CPU: 0.3, MemoryUsed: 3 << 30, MemoryTotal: 8 << 30, NetworkTx: 3, GPUs: "3"}
	want := map[string]UsageValues{"n1/": last, "n1/train": last, "n2/": {}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("latest = %v, want %v (no unusable node, the newest sample)", seen, want)
	}

	// The job ends: its node no longer holds it, and it is no longer
	// among the latest.
	if err := PutNode(ctx, db.W(), Node{ID: "n1", Compute: comp, State: api.NodeIdle, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if latest, _ := LatestUsages(ctx, db.Q()); len(latest) != 2 {
		t.Errorf("after the job ended: %+v, want the two nodes only", latest)
	}

	// Retention: samples before 30s go, and the gone node's latest.
	if err := DeleteNode(ctx, db.W(), "n2", t0.Add(40*time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := DeleteUsageBefore(ctx, db.W(), t0.Add(30*time.Second))
	if err != nil || n != 2*4+1 {
		t.Errorf("pruned %d, %v; want 9", n, err)
	}
	if left, _ := UsageSamples(ctx, db.Q(), UsageQuery{Compute: comp}); len(left) != 6 {
		t.Errorf("after pruning: %d node samples, want 6 (30s and 45s of three nodes)", len(left))
	}
	var latestRows int
	if err := db.Q().QueryRowContext(ctx, `SELECT count(*) FROM usage_latest`).Scan(&latestRows); err != nil || latestRows != 3 {
		t.Errorf("latest rows after pruning: %d, %v; want n1, its job, n3", latestRows, err)
	}
}
