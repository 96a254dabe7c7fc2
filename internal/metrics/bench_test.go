package metrics

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Scale of BenchmarkScrape: 10,000 nodes in 10 clusters and 1,000,000
// jobs, as a large shared installation after months of use.
const (
	benchComputes = 10
	benchNodes    = 10_000
	benchJobs     = 1_000_000
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchStore builds the store once per test binary: computes through the
// store, nodes and jobs inserted in bulk by SQL (the store's triggers keep
// their counts, as for rows written one by one).
func benchStore(b *testing.B) string {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "cumulus-metrics-bench-")
		if benchErr != nil {
			return
		}
		path := filepath.Join(benchDir, "state.db")
		ctx := context.Background()
		db, err := store.OpenSQLite(ctx, path)
		if err != nil {
			benchErr = err
			return
		}
		ids := make([]string, benchComputes)
		for i := range ids {
			c := putCompute(b, db, fmt.Sprintf("cluster%02d", i), "Standard_NC6s_v3", api.PriorityDedicated, 0, 2000, 1000)
			ids[i] = store.Key(c.ID)
		}
		if benchErr = db.Close(); benchErr != nil {
			return
		}
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
		if err != nil {
			benchErr = err
			return
		}
		defer raw.Close()
		states := []string{api.NodeRunning, api.NodeRunning, api.NodeRunning, api.NodeIdle, api.NodePreparing,
			api.NodeLeaving, api.NodePreempted, api.NodeUnusable}
		statuses := []string{api.JobCompleted, api.JobCompleted, api.JobCompleted, api.JobCompleted, api.JobCompleted,
			api.JobFailed, api.JobCanceled, api.JobQueued, api.JobRunning, api.JobPreparing}
		tx, err := raw.Begin()
		if err != nil {
			benchErr = err
			return
		}
		for ci, id := range ids {
			_, err := tx.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
				INSERT INTO nodes (id, compute, state, job, body, created)
				SELECT printf('c%d-n%d', ?, i), ?, `+cycle(states)+`, '',
					json_object('id', printf('c%d-n%d', ?, i), 'compute', ?, 'state', `+cycle(states)+`, 'vmSize', 'Standard_NC6s_v3'), 0 FROM n`,
				benchNodes/benchComputes, ci, id, ci, id)
			if err != nil {
				benchErr = fmt.Errorf("nodes: %w", err)
				return
			}
			_, err = tx.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
				INSERT INTO jobs (uid, parent, name, compute, status, seq, version, body, created)
				SELECT printf('c%d-j%d', ?, i), 'ws', printf('c%d-j%d', ?, i), ?, `+cycle(statuses)+`,
					? * ? + i + 1, 1, '{"doc":{}}', 0 FROM n`,
				benchJobs/benchComputes, ci, ci, id, ci, benchJobs/benchComputes)
			if err != nil {
				benchErr = fmt.Errorf("jobs: %w", err)
				return
			}
		}
		if benchErr = benchUsage(tx); benchErr != nil {
			return
		}
		benchErr = tx.Commit()
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return filepath.Join(benchDir, "state.db")
}

// benchUsage gives every node a latest utilization sample with one GPU,
// and every running node a running job with a sample of its own, as
// agents leave them.
func benchUsage(tx *sql.Tx) error {
	util := 0.8
	gpus := agentapi.FormatGPUs([]agentapi.GPUUsage{{Index: 0, Utilization: &util, MemoryUsed: 12 << 30, MemoryTotal: 16 << 30}})
	// Running nodes (states 0-2 of the cycle of 8) run job i*10+8 of
	// their compute, which the cycle of 10 statuses makes Running.
	if _, err := tx.Exec(`UPDATE nodes SET job = substr(id, 1, instr(id, '-') - 1) || '-j' ||
		(CAST(substr(id, instr(id, '-n') + 2) AS INTEGER) * 10 + 8) WHERE state = ?`, api.NodeRunning); err != nil {
		return fmt.Errorf("node jobs: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO usage_latest (node, job, compute, time, cpu, memory_used, memory_total, disk_used, net_rx, net_tx, gpus, job_name)
		SELECT id, '', compute, 1700000000000, 0.53, 64424509440, 120259084288, 214748364800, 123456789012, 98765432109, ?, '' FROM nodes`, gpus); err != nil {
		return fmt.Errorf("node usage: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO usage_latest (node, job, compute, time, cpu, memory_used, memory_total, disk_used, net_rx, net_tx, gpus, job_name)
		SELECT id, job, compute, 1700000000000, 0.5, 42949672960, 0, 0, 0, 0, ?, job FROM nodes WHERE job != ''`, gpus); err != nil {
		return fmt.Errorf("job usage: %w", err)
	}
	return nil
}

// cycle is an SQL expression that gives row i the value vs[i % len(vs)].
func cycle(vs []string) string {
	out := fmt.Sprintf("CASE i %% %d", len(vs))
	for i, v := range vs {
		out += fmt.Sprintf(" WHEN %d THEN '%s'", i, v)
	}
	return out + " END"
}

// BenchmarkScrape is one whole scrape of /metrics (gauges read from the
// store, event metrics, Go and process metrics, text encoding) at 10,000
// nodes and 1,000,000 jobs, and for comparison of the same 10 clusters
// with no nodes or jobs: the cost must not grow with nodes and jobs.
func BenchmarkScrape(b *testing.B) {
	b.Run("clusters=10,nodes=10000,jobs=1000000", func(b *testing.B) {
		db, err := store.OpenSQLite(context.Background(), benchStore(b))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		m := New(Options{DB: db, Limits: limits})
		if got := gauge(b, m, "cumulus_compute_nodes", map[string]string{"workspace": "ws1", "compute": "cluster00", "state": api.NodeRunning}); got != 375 {
			b.Fatalf("running nodes of cluster00 = %v, want 375", got)
		}
		if got := gauge(b, m, "cumulus_jobs", map[string]string{"workspace": "ws1", "compute": "cluster03", "status": api.JobCompleted}); got != 50_000 {
			b.Fatalf("completed jobs of cluster03 = %v, want 50000", got)
		}
		mfs := scrapeFamilies(b, m)
		if got := value(b, mfs, "cumulus_node_gpu_utilization", map[string]string{"workspace": "ws1", "compute": "cluster00", "node": "c0-n8", "gpu": "0"}); got != 0.8 {
			b.Fatalf("GPU utilization of c0-n8 = %v, want 0.8", got)
		}
		if got := value(b, mfs, "cumulus_job_cpu_utilization", map[string]string{"workspace": "ws1", "compute": "cluster00", "job": "c0-j88"}); got != 0.5 {
			b.Fatalf("CPU utilization of job c0-j88 (on c0-n8) = %v, want 0.5", got)
		}
		if n := len(mfs["cumulus_node_cpu_utilization"].GetMetric()); n != 7500 {
			b.Fatalf("%d nodes with a CPU utilization, want the 7,500 not unusable or preempted", n)
		}
		scrape(b, m)
	})
	b.Run("clusters=10,nodes=0,jobs=0", func(b *testing.B) {
		db := openStore(b)
		for i := 0; i < benchComputes; i++ {
			putCompute(b, db, fmt.Sprintf("cluster%02d", i), "Standard_NC6s_v3", api.PriorityDedicated, 0, 2000, 1000)
		}
		scrape(b, New(Options{DB: db, Limits: limits}))
	})
}

func scrape(b *testing.B, m *Metrics) {
	h := m.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := &discard{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != 0 && w.code != http.StatusOK {
			b.Fatalf("scrape: %d", w.code)
		}
	}
}

// discard is a ResponseWriter that throws the body away.
type discard struct {
	header http.Header
	code   int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (d *discard) WriteHeader(code int)        { d.code = code }
