package cluster

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// A job that burns CPU on a local node: while it runs, /metrics shows its
// CPU utilization, and its samples (through the REST API and the CLI)
// show CPU and memory in use; the node's own samples have its memory and
// disk. The agents sample every 500 ms (--usage-interval).
func TestJobUtilization(t *testing.T) {
	metricsAddr := freeAddr(t)
	s := startServer(t, "--metrics-listen", metricsAddr, "--usage-interval", "500ms")
	s.createCompute("burners", 0, 1, "PT60S")
	stop := filepath.Join(t.TempDir(), "stop")
	s.submit("burn", "burners", `while [ ! -e '`+stop+`' ]; do :; done`)
	waitFor(t, "the job to run", 60*time.Second, func() bool { return s.job("burn").Properties.Status == api.JobRunning })

	jobCPU := regexp.MustCompile(`(?m)^cumulus_job_cpu_utilization\{[^}]*job="burn"[^}]*\} (\S+)$`)
	var scraped string
	waitFor(t, "the job's CPU utilization in /metrics", 30*time.Second, func() bool {
		res, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		scraped = string(b)
		m := jobCPU.FindStringSubmatch(scraped)
		if m == nil {
			return false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return err == nil && v > 0
	})
	for _, name := range []string{"cumulus_node_cpu_utilization", "cumulus_node_memory_used_bytes", "cumulus_node_disk_used_bytes", "cumulus_job_memory_used_bytes"} {
		if !regexp.MustCompile(`(?m)^` + name + `\{[^}]*compute="burners"`).MatchString(scraped) {
			t.Errorf("/metrics has no %s of the cluster", name)
		}
	}

	samples, err := s.c.JobUsage(bctx, "burn", client.UsageRange{})
	if err != nil {
		t.Fatal(err)
	}
	busy := false
	for _, u := range samples {
		if u.CPU.Utilization > 0 && u.Memory.UsedBytes > 0 && u.CPU.Seconds > 0 {
			busy = true
		}
	}
	if !busy {
		t.Errorf("no job sample with CPU and memory in use: %+v", samples)
	}
	nodes, err := s.c.ComputeUsage(bctx, "burners", client.UsageRange{})
	if err != nil || len(nodes) == 0 {
		t.Fatalf("node samples: %v, %v", nodes, err)
	}
	if n := nodes[len(nodes)-1]; n.Memory.TotalBytes <= 0 || n.Memory.UsedBytes <= 0 || n.Disk == nil || n.Disk.TotalBytes <= 0 || n.CPU.CPUs <= 0 {
		t.Errorf("node sample = %+v", n)
	}

	out, errOut, code := s.cli(t.TempDir(), "-o", "json", "job", "usage", "-n", "burn")
	var viaCLI []api.UsageSample
	if code != 0 || json.Unmarshal([]byte(out), &viaCLI) != nil || len(viaCLI) == 0 {
		t.Errorf("job usage -o json: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := s.cli(t.TempDir(), "compute", "usage", "-n", "burners"); code != 0 || !regexp.MustCompile(`(?m)^\S+ \S+\s+\S+\s+\d+%`).MatchString(out) {
		t.Errorf("compute usage: %d\n%s%s", code, out, errOut)
	}

	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitJob("burn", api.JobCompleted, 30*time.Second)
	waitFor(t, "the finished job to leave /metrics", 30*time.Second, func() bool {
		res, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return !jobCPU.Match(b)
	})
}
