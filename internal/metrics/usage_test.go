package metrics

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// scrapeFamilies scrapes m's handler and parses the text it answers.
func scrapeFamilies(t testing.TB, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", w.Code, w.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return mfs
}

// value is the value of the series of name with exactly these labels; -1
// when there is none.
func value(t testing.TB, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
next:
	for _, s := range mfs[name].GetMetric() {
		if len(s.GetLabel()) != len(want) {
			continue
		}
		for _, l := range s.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case s.GetGauge() != nil:
			return s.GetGauge().GetValue()
		case s.GetCounter() != nil:
			return s.GetCounter().GetValue()
		}
	}
	return -1
}

// The latest sample of each live node and running job is exposed, summed
// over a job's nodes; an unusable node's and a finished job's are not.
func TestUsageGauges(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	c := putCompute(t, db, "gpu", "Standard_NC6s_v3", api.PriorityDedicated, 0, 4, 0)
	for _, n := range []store.Node{
		{ID: "n1", Compute: c.ID, State: api.NodeRunning, JobID: "u1"},
		{ID: "n2", Compute: c.ID, State: api.NodeRunning, JobID: "u1"},
		{ID: "n3", Compute: c.ID, State: api.NodeUnusable},
	} {
		if err := store.PutNode(ctx, db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	j := &store.Job{UID: "u1", Parent: "/ws", Compute: c.ID}
	j.Doc.Name = `train "big"`
	j.Doc.Properties.Status = api.JobRunning
	if err := store.InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	u := func(v float64) *float64 { return &v }
	gpus := agentapi.FormatGPUs([]agentapi.GPUUsage{{Index: 0, Utilization: u(0.2), MemoryUsed: 1 << 30}, {Index: 1, MemoryUsed: 2 << 30}})
	at := time.Unix(1_700_000_000, 0)
	var rows []store.UsageRow
	for i, n := range []string{"n1", "n2", "n3"} {
		rows = append(rows,
			store.UsageRow{Compute: store.Key(c.ID), Node: n, Time: at, Body: "{}", Latest: store.UsageValues{CPU: 0.5, MemoryUsed: 3 << 30,
				MemoryTotal: 8 << 30, DiskUsed: 7, NetworkRx: 100, NetworkTx: 200, GPUs: gpus}},
			store.UsageRow{Compute: store.Key(c.ID), Node: n, Job: "u1", JobName: j.Doc.Name, Time: at, Body: "{}", Latest: store.UsageValues{CPU: 0.25 * float64(i+1),
				MemoryUsed: 1 << 30, GPUs: agentapi.FormatGPUs([]agentapi.GPUUsage{{Index: 0, Utilization: u(0.2 + 0.4*float64(i))}})}})
	}
	if err := db.Tx(ctx, func(q store.Querier) error { return store.PutUsage(ctx, q, rows) }); err != nil {
		t.Fatal(err)
	}
	mfs := scrapeFamilies(t, New(Options{DB: db}))
	node := map[string]string{"workspace": "ws1", "compute": "gpu", "node": "n1"}
	for name, want := range map[string]float64{
		"cumulus_node_cpu_utilization": 0.5, "cumulus_node_memory_used_bytes": 3 << 30, "cumulus_node_memory_total_bytes": 8 << 30,
		"cumulus_node_disk_used_bytes": 7, "cumulus_node_network_receive_bytes_total": 100, "cumulus_node_network_transmit_bytes_total": 200,
	} {
		if got := value(t, mfs, name, node); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	gpu := func(i string) map[string]string {
		return map[string]string{"workspace": "ws1", "compute": "gpu", "node": "n2", "gpu": i}
	}
	if got := value(t, mfs, "cumulus_node_gpu_utilization", gpu("0")); got != 0.2 {
		t.Errorf("GPU 0 utilization = %v", got)
	}
	if got := value(t, mfs, "cumulus_node_gpu_utilization", gpu("1")); got != -1 {
		t.Errorf("GPU 1, which reports no utilization, has %v", got)
	}
	if got := value(t, mfs, "cumulus_node_gpu_memory_used_bytes", gpu("1")); got != 2<<30 {
		t.Errorf("GPU 1 memory = %v", got)
	}
	if n := len(mfs["cumulus_node_cpu_utilization"].GetMetric()); n != 2 {
		t.Errorf("%d nodes exposed, want n1 and n2 (not the unusable n3)", n)
	}
	job := map[string]string{"workspace": "ws1", "compute": "gpu", "job": `train "big"`}
	// The job on n1 and n2 (n3's sample is of an unusable node).
	if got := value(t, mfs, "cumulus_job_cpu_utilization", job); got != 0.375 {
		t.Errorf("job CPU = %v, want the mean of 0.25 and 0.5", got)
	}
	if got := value(t, mfs, "cumulus_job_memory_used_bytes", job); got != 2<<30 {
		t.Errorf("job memory = %v, want the sum over its two nodes", got)
	}
	if got := value(t, mfs, "cumulus_job_gpu_utilization", job); got < 0.3999 || got > 0.4001 {
		t.Errorf("job GPU = %v, want the mean of 0.2 and 0.6", got)
	}

	// The job ends: its nodes no longer hold it.
	for _, n := range []string{"n1", "n2"} {
		if err := store.PutNode(ctx, db.W(), store.Node{ID: n, Compute: c.ID, State: api.NodeIdle}); err != nil {
			t.Fatal(err)
		}
	}
	mfs = scrapeFamilies(t, New(Options{DB: db}))
	if _, ok := mfs["cumulus_job_cpu_utilization"]; ok {
		t.Error("a finished job still has a CPU utilization")
	}
	if value(t, mfs, "cumulus_compute_nodes", map[string]string{"workspace": "ws1", "compute": "gpu", "state": api.NodeIdle}) != 2 {
		t.Error("the registry's families are not in the same answer")
	}
}
