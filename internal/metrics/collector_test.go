package metrics

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/metrics/metricstest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var testScope = api.Scope{Subscription: "sub1", ResourceGroup: "rg1", Workspace: "ws1"}

func openStore(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// putCompute stores an AmlCompute as the server would after a PUT and a
// controller pass (target written).
func putCompute(t testing.TB, db *store.DB, name, size, priority string, min, max, target int32) api.Compute {
	t.Helper()
	c := api.Compute{ID: testScope.ComputeID(name), Name: name, Location: "westus2"}
	c.Properties.ComputeType = "AmlCompute"
	c.Properties.ComputeLocation = "westus2"
	a := c.Aml()
	a.VMSize, a.VMPriority = size, priority
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max}
	a.TargetNodeCount = target
	if _, err := store.Put(context.Background(), db.W(), store.KindCompute, testScope.WorkspaceID(), name, c, store.IfNoneMatch, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	return c
}

func putNodes(t testing.TB, db *store.DB, compute, state string, n int) {
	t.Helper()
	err := db.Tx(context.Background(), func(q store.Querier) error {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%s-%d", compute[strings.LastIndex(compute, "/")+1:], state, i)
			if err := store.PutNode(context.Background(), q, store.Node{ID: id, Compute: compute, State: state, Created: time.Unix(1, 0)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func putJobs(t testing.TB, db *store.DB, compute, status string, n int) {
	t.Helper()
	err := db.Tx(context.Background(), func(q store.Querier) error {
		for i := 0; i < n; i++ {
			j := &store.Job{UID: fmt.Sprintf("%s-%s-%d", compute, status, i), Parent: testScope.WorkspaceID(), Compute: compute, Created: time.Unix(1, 0)}
			j.Doc.Name = j.UID
			j.Doc.Properties.Status = status
			if err := store.InsertJob(context.Background(), q, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func limits(_ context.Context, _ store.Querier, sub, loc string) (quota.Limits, error) {
	return quota.Limits{Family: map[string]int64{"standardNCSv3Family": 24}, DefaultFam: 100, Dedicated: 200, LowPriority: 50}, nil
}

// The gauges read from a real store: node and core counts by state (zeros
// included), scale settings, jobs by status and quota per family and pool.
func TestCollectorReadsTheStore(t *testing.T) {
	db := openStore(t)
	cpu := putCompute(t, db, "cpu", "Standard_DS3_v2", api.PriorityDedicated, 0, 8, 3) // 4 cores, standardDSv2Family
	gpu := putCompute(t, db, "gpu", "Standard_NC6s_v3", api.PriorityLowPriority, 1, 4, 1)
	putNodes(t, db, cpu.ID, api.NodeRunning, 2)
	putNodes(t, db, cpu.ID, api.NodeIdle, 1)
	putNodes(t, db, gpu.ID, api.NodePreempted, 1)
	putJobs(t, db, cpu.ID, api.JobRunning, 2)
	putJobs(t, db, cpu.ID, api.JobQueued, 3)
	putJobs(t, db, gpu.ID, api.JobFailed, 1)

	m := New(Options{DB: db, Limits: limits})
	var want strings.Builder
	want.WriteString("# HELP cumulus_compute_nodes Nodes of a compute by state.\n# TYPE cumulus_compute_nodes gauge\n")
	counts := map[string]map[string]int{"cpu": {api.NodeRunning: 2, api.NodeIdle: 1}, "gpu": {api.NodePreempted: 1}}
	for _, c := range []string{"cpu", "gpu"} {
		for _, st := range []string{"idle", "leaving", "preempted", "preparing", "running", "unusable"} {
			fmt.Fprintf(&want, "cumulus_compute_nodes{compute=%q,state=%q,workspace=\"ws1\"} %d\n", c, st, counts[c][st])
		}
	}
	want.WriteString(`# HELP cumulus_compute_cores Cores (vCPUs) of a compute's nodes by state.
# TYPE cumulus_compute_cores gauge
cumulus_compute_cores{compute="cpu",state="idle",workspace="ws1"} 4
cumulus_compute_cores{compute="cpu",state="running",workspace="ws1"} 8
cumulus_compute_cores{compute="gpu",state="preempted",workspace="ws1"} 6
# HELP cumulus_compute_target_nodes Nodes the autoscaler wants the compute to have.
# TYPE cumulus_compute_target_nodes gauge
cumulus_compute_target_nodes{compute="cpu",workspace="ws1"} 3
cumulus_compute_target_nodes{compute="gpu",workspace="ws1"} 1
# HELP cumulus_compute_max_nodes The compute's maxNodeCount.
# TYPE cumulus_compute_max_nodes gauge
cumulus_compute_max_nodes{compute="cpu",workspace="ws1"} 8
cumulus_compute_max_nodes{compute="gpu",workspace="ws1"} 4
# HELP cumulus_quota_used_cores Cores the clusters of a subscription use in a location, per VM family (family="total": the location-wide pool) and priority.
# TYPE cumulus_quota_used_cores gauge
cumulus_quota_used_cores{family="standardDSv2Family",location="westus2",priority="dedicated",subscription="sub1"} 12
cumulus_quota_used_cores{family="standardNCSv3Family",location="westus2",priority="dedicated",subscription="sub1"} 0
cumulus_quota_used_cores{family="total",location="westus2",priority="dedicated",subscription="sub1"} 12
cumulus_quota_used_cores{family="total",location="westus2",priority="low_priority",subscription="sub1"} 6
# HELP cumulus_quota_limit_cores Core quota of a subscription in a location, per VM family (family="total": the location-wide pool) and priority.
# TYPE cumulus_quota_limit_cores gauge
cumulus_quota_limit_cores{family="standardDSv2Family",location="westus2",priority="dedicated",subscription="sub1"} 100
cumulus_quota_limit_cores{family="standardNCSv3Family",location="westus2",priority="dedicated",subscription="sub1"} 24
cumulus_quota_limit_cores{family="total",location="westus2",priority="dedicated",subscription="sub1"} 200
cumulus_quota_limit_cores{family="total",location="westus2",priority="low_priority",subscription="sub1"} 50
`)
	names := []string{"cumulus_compute_nodes", "cumulus_compute_target_nodes", "cumulus_compute_max_nodes",
		"cumulus_quota_used_cores", "cumulus_quota_limit_cores"}
	if err := testutil.GatherAndCompare(metricstest.Gatherer(m.Handler()), strings.NewReader(want.String()), names...); err != nil {
		t.Error(err)
	}
	// Cores: only the non-zero rows are spelled out above; check them
	// one by one.
	cores := map[string]float64{"cpu/idle": 4, "cpu/running": 8, "gpu/preempted": 6, "gpu/running": 0, "cpu/leaving": 0}
	for k, v := range cores {
		c, st, _ := strings.Cut(k, "/")
		if got := gauge(t, m, "cumulus_compute_cores", map[string]string{"workspace": "ws1", "compute": c, "state": st}); got != v {
			t.Errorf("cumulus_compute_cores{%s} = %v, want %v", k, got, v)
		}
	}
	jobs := map[string]float64{"cpu/" + api.JobRunning: 2, "cpu/" + api.JobQueued: 3, "gpu/" + api.JobFailed: 1, "gpu/" + api.JobQueued: 0}
	for k, v := range jobs {
		c, st, _ := strings.Cut(k, "/")
		if got := gauge(t, m, "cumulus_jobs", map[string]string{"workspace": "ws1", "compute": c, "status": st}); got != v {
			t.Errorf("cumulus_jobs{%s} = %v, want %v", k, got, v)
		}
	}
	if n, err := testutil.GatherAndCount(metricstest.Gatherer(m.Handler()), "cumulus_jobs"); err != nil || n != 2*len(api.JobStatuses) {
		t.Errorf("cumulus_jobs has %d series (%v), want %d: every status of each compute", n, err, 2*len(api.JobStatuses))
	}
}

// gauge reads one series of the registry.
func gauge(t testing.TB, m *Metrics, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := metricstest.Gatherer(m.Handler()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			if len(got) != len(want) {
				continue
			}
			switch {
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// A running parallel step's mini-batches by state, and its retries, while
// it has some to end.
func TestCollectorParallelSteps(t *testing.T) {
	db := openStore(t)
	putJobs(t, db, "c", api.JobRunning, 1)
	ctx := context.Background()
	if err := store.PlanBatches(ctx, db.W(), "c-Running-0", []int{5, 5, 5}); err != nil {
		t.Fatal(err)
	}
	leased, err := store.LeaseBatches(ctx, db.W(), "c-Running-0", "n1", 1, 2, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	b := leased[0]
	b.State, b.Retries = store.BatchDone, 1
	if err := store.PutBatch(ctx, db.W(), b); err != nil {
		t.Fatal(err)
	}
	m := New(Options{DB: db})
	for state, want := range map[string]float64{"pending": 1, "running": 1, "done": 1, "failed": 0} {
		if got := gauge(t, m, "cumulus_parallel_mini_batches", map[string]string{"workspace": testScope.Workspace, "job": "c-Running-0", "state": state}); got != want {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	if got := gauge(t, m, "cumulus_parallel_mini_batch_retries", map[string]string{"workspace": testScope.Workspace, "job": "c-Running-0"}); got != 1 {
		t.Errorf("retries %v", got)
	}
}
