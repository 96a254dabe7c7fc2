package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/metrics/metricstest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The store's committed changes feed the event metrics: job transitions
// and queue time, node provisioning time and preemptions (a node that
// never registered is no provisioning time).
func TestStoreChangesFeedEventMetrics(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	m := New(Options{DB: db})
	db.SetObserver(m)
	cpu := putCompute(t, db, "cpu", "Standard_DS3_v2", api.PriorityDedicated, 0, 8, 0)

	submitted := time.Unix(1000, 0)
	j := &store.Job{UID: "u1", Parent: testScope.WorkspaceID(), Compute: cpu.ID, Created: submitted}
	j.Doc.Name = "j1"
	j.Doc.Properties.Status = api.JobQueued
	if err := db.Tx(ctx, func(q store.Querier) error { return store.InsertJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	started := submitted.Add(42 * time.Second)
	j.Attempt, j.Doc.Properties.StartTime, j.Doc.Properties.Status = 1, &started, api.JobRunning
	if err := db.Tx(ctx, func(q store.Querier) error { return store.UpdateJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}

	created := time.Unix(2000, 0)
	n := store.Node{ID: "n1", Compute: cpu.ID, State: api.NodePreparing, Created: created}
	lost := store.Node{ID: "n2", Compute: cpu.ID, State: api.NodePreparing, Created: created}
	for _, x := range []store.Node{n, lost} {
		if err := db.Tx(ctx, func(q store.Querier) error { return store.PutNode(ctx, q, x) }); err != nil {
			t.Fatal(err)
		}
	}
	n.State, n.Ready = api.NodeIdle, created.Add(30*time.Second)
	lost.State, lost.Reason = api.NodeUnusable, "provisioning timed out"
	for _, x := range []store.Node{n, lost} {
		if err := db.Tx(ctx, func(q store.Querier) error { return store.PutNode(ctx, q, x) }); err != nil {
			t.Fatal(err)
		}
	}
	n.State = api.NodePreempted
	if err := db.Tx(ctx, func(q store.Querier) error { return store.PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}

	cw := map[string]string{"workspace": "ws1", "compute": "cpu"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cumulus_job_transitions_total", map[string]string{"to": api.JobQueued}, 1},
		{"cumulus_job_transitions_total", map[string]string{"to": api.JobRunning}, 1},
		{"cumulus_job_queue_seconds", map[string]string{}, 1}, // one observation
		{"cumulus_node_provision_seconds", cw, 1},
		{"cumulus_preemptions_total", cw, 1},
		{"cumulus_store_transaction_seconds", map[string]string{"outcome": "committed"}, 8}, // one a write, the compute's too
	} {
		if got := gauge(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	want := `# HELP cumulus_job_queue_seconds Time from a job's submission to its first start (Running).
# TYPE cumulus_job_queue_seconds histogram
cumulus_job_queue_seconds_bucket{le="1"} 0
cumulus_job_queue_seconds_bucket{le="5"} 0
cumulus_job_queue_seconds_bucket{le="15"} 0
cumulus_job_queue_seconds_bucket{le="30"} 0
cumulus_job_queue_seconds_bucket{le="60"} 1
cumulus_job_queue_seconds_bucket{le="120"} 1
cumulus_job_queue_seconds_bucket{le="300"} 1
cumulus_job_queue_seconds_bucket{le="600"} 1
cumulus_job_queue_seconds_bucket{le="1800"} 1
cumulus_job_queue_seconds_bucket{le="3600"} 1
cumulus_job_queue_seconds_bucket{le="7200"} 1
cumulus_job_queue_seconds_bucket{le="21600"} 1
cumulus_job_queue_seconds_bucket{le="86400"} 1
cumulus_job_queue_seconds_bucket{le="+Inf"} 1
cumulus_job_queue_seconds_sum 42
cumulus_job_queue_seconds_count 1
`
	if err := testutil.GatherAndCompare(metricstest.Gatherer(m.Handler()), strings.NewReader(want), "cumulus_job_queue_seconds"); err != nil {
		t.Error(err)
	}
}

// Route and reason labels stay bounded: an unknown reason is "other".
func TestProvisionFailureReasonsAreBounded(t *testing.T) {
	m := New(Options{})
	id := testScope.ComputeID("cpu")
	m.ProvisionFailed(id, ReasonCreate)
	m.ProvisionFailed(id, "provider said: quota exhausted in zone 3")
	if got := gauge(t, m, "cumulus_node_provision_failures_total", map[string]string{"workspace": "ws1", "compute": "cpu", "reason": "other"}); got != 1 {
		t.Errorf("reason other = %v, want 1", got)
	}
	if n, _ := testutil.GatherAndCount(metricstest.Gatherer(m.Handler()), "cumulus_node_provision_failures_total"); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
	var nilMetrics *Metrics
	nilMetrics.ScaledUp(id, 1) // a nil *Metrics records nothing and does not panic
	nilMetrics.Request("GET", "/x", 200, time.Second)
}
