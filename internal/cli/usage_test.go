package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// `compute usage` and `job usage` show what the agents sampled, as a
// table (with a word about a job that leaves its GPUs idle) or JSON; a
// bad --since is one line.
func TestUsageCommands(t *testing.T) {
	d, cfg := startDaemon(t, func(o *daemon.Options) { o.AgentCommand = []string{"true"} })
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, append([]string{"--config", cfg}, args...)...)
	}
	if _, errOut, code := cli("compute", "create", "-n", "gpu-cluster", "--type", "AmlCompute", "--max-instances", "1"); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	if _, errOut, code := cli("job", "create", "--name", "train", "--compute", "gpu-cluster", "--command", "true"); code != 0 {
		t.Fatalf("job create: %s", errOut)
	}
	ctx := context.Background()
	comp, err := store.Get[api.Compute](ctx, d.DB.Q(), store.KindCompute, "/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default", "gpu-cluster")
	if err != nil {
		t.Fatal(err)
	}
	j, err := store.GetJob(ctx, d.DB.Q(), store.Key("/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default"), "train")
	if err != nil {
		t.Fatal(err)
	}
	util := 0.2
	at := time.Now().Add(-time.Minute).UTC()
	node, _ := json.Marshal(agentapi.Usage{Time: at, CPU: 0.5, CPUs: 4, MemoryUsed: 2 << 30, MemoryTotal: 8 << 30, DiskUsed: 1 << 30, DiskTotal: 4 << 30,
		NetworkReceived: 2048, NetworkSent: 1024, GPUs: []agentapi.GPUUsage{{Index: 0, Utilization: &util, MemoryUsed: 3 << 30}}})
	job, _ := json.Marshal(agentapi.JobUsage{UID: j.UID, CPU: 0.25, CPUSeconds: 42, MemoryUsed: 1 << 30, GPUs: []agentapi.GPUUsage{{Index: 0, Utilization: &util}}})
	rows := []store.UsageRow{{Compute: store.Key(comp.Value.ID), Node: "node-a", Time: at, Body: string(node)},
		{Compute: store.Key(comp.Value.ID), Node: "node-a", Job: j.UID, Time: at, Body: string(job)}}
	if err := d.DB.Tx(ctx, func(q store.Querier) error { return store.PutUsage(ctx, q, rows) }); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := cli("compute", "usage", "-n", "gpu-cluster", "--since", "1h")
	if code != 0 {
		t.Fatalf("compute usage: %d %s", code, errOut)
	}
	for _, want := range []string{"NODE", "CPU", "GPU MEMORY", "node-a", "50%", "2.0GiB / 8.0GiB", "20%", "3.0GiB", "2.0KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("compute usage lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := cli("compute", "usage", "-n", "gpu-cluster", "--node", "node-b"); strings.Contains(out, "node-a") {
		t.Errorf("--node node-b shows node-a:\n%s", out)
	}
	out, errOut, code = cli("job", "usage", "-n", "train")
	if code != 0 || !strings.Contains(out, "42.0") || !strings.Contains(out, "25%") {
		t.Errorf("job usage: %d\n%s", code, out)
	}
	if !strings.Contains(errOut, "GPU utilization below 50 %") {
		t.Errorf("no word about the idle GPU: %q", errOut)
	}
	out, _, code = cli("-o", "json", "job", "usage", "-n", "train")
	var samples []api.UsageSample
	if err := json.Unmarshal([]byte(out), &samples); code != 0 || err != nil || len(samples) != 1 || samples[0].CPU.Seconds != 42 {
		t.Errorf("job usage -o json: %d %v\n%s", code, err, out)
	}
	_, errOut, code = cli("compute", "usage", "-n", "gpu-cluster", "--since", "yesterday")
	if code == 0 || !strings.HasPrefix(errOut, "error: --since \"yesterday\"") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("bad --since: %d %q", code, errOut)
	}
	_, errOut, code = cli("job", "usage", "-n", "nope")
	if code == 0 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("unknown job: %d %q", code, errOut)
	}
}
