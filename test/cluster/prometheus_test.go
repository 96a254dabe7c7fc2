package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// needPrometheus returns the prometheus server's path; without it the
// test is skipped here and fails in CI (Debian's prometheus package,
// installed by scripts/test-setup.sh).
func needPrometheus(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus (Debian package prometheus) is required in CI")
		}
		t.Skip("skipping: no prometheus server here (apt-get install prometheus)")
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// A real Prometheus server scrapes a running Cumulus (its loopback
// metrics listener) while a job runs: its queries see the cluster's
// running nodes go 0 → 1 → 0 and the job's transitions.
func TestPrometheusScrapesAJob(t *testing.T) {
	prom := needPrometheus(t)
	metricsAddr := freeAddr(t)
	s := startServer(t, "--metrics-listen", metricsAddr)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	write(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: cumulus
    static_configs:
      - targets: ['%s']
`, metricsAddr))
	promAddr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", tail(string(b), 4000))
		}
	})

	// query returns the value of an instant query with one series, or -1
	// while it has none (or Prometheus is not up yet).
	query := func(q string) float64 {
		res, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		var body struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Status != "success" || len(body.Data.Result) != 1 {
			return -1
		}
		v, _ := body.Data.Result[0].Value[1].(string)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return -1
		}
		return f
	}
	running := `cumulus_compute_nodes{compute="prom1",state="running"}`
	waitUntil := func(what string, q string, want float64) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%s (%s == %v)", what, q, want), 60*time.Second, func() bool { return query(q) == want })
	}

	s.createCompute("prom1", 0, 1, "PT0S")
	waitUntil("the empty cluster scraped", running, 0)

	// The job runs until the test has seen it in Prometheus.
	release := filepath.Join(dir, "release")
	s.submit("prom-job", "prom1", "while [ ! -e "+release+" ]; do sleep 0.05; done")
	waitUntil("the job's node scraped as running", running, 1)
	if got := query(`cumulus_jobs{compute="prom1",status="Running"}`); got != 1 {
		t.Errorf("cumulus_jobs Running = %v, want 1", got)
	}
	write(t, release, "")
	waitFor(t, "the job to complete", 60*time.Second, func() bool { return s.job("prom-job").Properties.Status == api.JobCompleted })
	waitUntil("the node no longer running", running, 0)
	waitUntil("the job's start counted", `sum(cumulus_job_transitions_total{to="Running"})`, 1)
	waitUntil("the job's completion counted", `sum(cumulus_job_transitions_total{to="Completed"})`, 1)
	waitUntil("one queue time observed", `cumulus_job_queue_seconds_count`, 1)
	waitUntil("one node provisioned", `sum(cumulus_node_provision_seconds_count{compute="prom1"})`, 1)
}
