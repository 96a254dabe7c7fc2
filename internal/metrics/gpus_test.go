package metrics

import (
	"context"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Which node holds which of the machine's devices, and how many are free.
func TestGPUHeldGauges(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	a := putCompute(t, db, "gpu-a", "Standard_NC6s_v3", api.PriorityDedicated, 0, 4, 0)
	b := putCompute(t, db, "gpu-b", "Standard_NC12s_v3", api.PriorityDedicated, 0, 1, 0)
	cpu := putCompute(t, db, "cpu", "Standard_DS3_v2", api.PriorityDedicated, 0, 1, 0)
	for _, n := range []store.Node{
		{ID: "a1", Compute: a.ID, State: api.NodeRunning, GPUDevices: []string{"2"}},
		{ID: "b1", Compute: b.ID, State: api.NodeIdle, GPUDevices: []string{"0", "1"}},
		{ID: "c1", Compute: cpu.ID, State: api.NodeIdle},
	} {
		if err := store.PutNode(ctx, db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	mfs := scrapeFamilies(t, New(Options{DB: db, GPUs: &gpu.Machine{Devices: gputest.Four()}}))
	held := func(compute, node, id string) map[string]string {
		return map[string]string{"workspace": "ws1", "compute": compute, "node": node, "gpu": id, "model": "NVIDIA H100 80GB HBM3"}
	}
	for _, w := range []map[string]string{held("gpu-a", "a1", "2"), held("gpu-b", "b1", "0"), held("gpu-b", "b1", "1")} {
		if got := value(t, mfs, "cumulus_node_gpu_held", w); got != 1 {
			t.Errorf("cumulus_node_gpu_held%v = %v, want 1", w, got)
		}
	}
	if n := len(mfs["cumulus_node_gpu_held"].GetMetric()); n != 3 {
		t.Errorf("%d held series, want 3 (the CPU node holds none)", n)
	}
	if got := value(t, mfs, "cumulus_machine_gpus_free", nil); got != 1 {
		t.Errorf("free GPUs %v, want 1", got)
	}
	if got := value(t, mfs, "cumulus_machine_gpus", nil); got != 4 {
		t.Errorf("GPUs %v, want 4", got)
	}
	if _, ok := scrapeFamilies(t, New(Options{DB: db}))["cumulus_node_gpu_held"]; ok {
		t.Error("a server whose nodes share no machine's devices has GPU allocation series")
	}
}
