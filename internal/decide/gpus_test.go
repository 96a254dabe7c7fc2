package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// TestGPUs covers what a machine's free devices allow a cluster whose
// nodes each hold some: no more new nodes than the free devices hold, the
// reason as a value (and in Blocked), the jobs that wait for devices, and
// idle nodes released early for other clusters.
func TestGPUs(t *testing.T) {
	heldA := []api.GPUHolder{{Compute: "gpu-a", Devices: 3}}
	tests := []struct {
		name string
		c    Cluster
		want Plan
	}{
		{
			name: "a 2-GPU node cannot be placed with 1 of 4 free: nothing is created, the job says why",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"),
				GPUs: &GPUs{PerNode: 2, Free: 1, Total: 4, Held: heldA}},
			want: Plan{Target: 0, Blocked: api.Blocks{gpusShort(2, 1, 4, heldA)}, GPUShort: 1, GPUWait: []Wait{{"a", 1}}},
		},
		{
			name: "the free devices hold one of the two nodes wanted: the second job waits",
			c: Cluster{Max: 4, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a", "b"),
				GPUs: &GPUs{PerNode: 2, Free: 3, Total: 4}},
			want: Plan{Create: 1, Target: 1, Blocked: api.Blocks{gpusShort(2, 3, 4, nil)}, GPUShort: 1, GPUWait: []Wait{{"b", 1}}},
		},
		{
			name: "a gang job waits whole: two nodes are created, it is short of the third",
			c: Cluster{Max: 4, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 3, 1)},
				GPUs: &GPUs{PerNode: 1, Free: 2, Total: 4}},
			want: Plan{Create: 2, Target: 2, Blocked: api.Blocks{gpusShort(1, 2, 4, nil)}, GPUShort: 1, GPUWait: []Wait{{"g", 1}}},
		},
		{
			name: "devices that do not bind leave the fields empty",
			c: Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a", "b"),
				GPUs: &GPUs{PerNode: 1, Free: 4, Total: 4}},
			want: Plan{Create: 2, Target: 2},
		},
		{
			name: "quota cuts first, then devices: each names the jobs it holds",
			c: Cluster{Max: 10, IdleTimeout: timeout, Headroom: 2, Queued: jobs("a", "b", "c"),
				GPUs: &GPUs{PerNode: 1, Free: 1, Total: 4}},
			want: Plan{Create: 1, Target: 1, Blocked: api.Blocks{quotaAllows(2), gpusShort(1, 1, 4, nil)},
				QuotaShort: 1, QuotaWait: []Wait{{"c", 1}}, GPUShort: 1, GPUWait: []Wait{{"b", 1}}},
		},
		{
			name: "idle nodes another cluster's nodes wait for go before their idle time, longest idle first, as many as free what they want",
			c: Cluster{Max: 4, IdleTimeout: timeout, Headroom: -1,
				Nodes: []Node{idleNode("i1", t0.Add(-3*time.Minute)), idleNode("i2", t0.Add(-2*time.Minute)), idleNode("i3", t0.Add(-time.Minute))},
				GPUs:  &GPUs{PerNode: 1, Free: 0, Total: 4, Wanted: 2}},
			want: Plan{Remove: []string{"i1", "i2"}, Target: 1, WakeAt: t0.Add(-time.Minute + timeout)},
		},
		{
			name: "released early only above the minimum and beyond what the cluster's own queue needs",
			c: Cluster{Min: 1, Max: 4, IdleTimeout: timeout, Headroom: -1, Queued: []Job{gang("g", 3, 1)},
				Nodes: []Node{idleNode("i1", t0.Add(-3*time.Minute)), idleNode("i2", t0.Add(-2*time.Minute)),
					runningNode("r1", "x", t0.Add(-time.Hour)), runningNode("r2", "y", t0.Add(-time.Hour))},
				GPUs: &GPUs{PerNode: 2, Free: 0, Total: 8, Wanted: 4}},
			// g needs 3 nodes: the two idle ones are its (it waits for
			// max), so none goes for the other cluster.
			want: Plan{Target: 4, Blocked: api.Blocks{atMax(4)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.c, t0)
			checkPlan(t, got, tt.want)
			if got.GPUShort != tt.want.GPUShort || !slices.Equal(got.GPUWait, tt.want.GPUWait) {
				t.Errorf("GPUs: short %d wait %v; want %d %v", got.GPUShort, got.GPUWait, tt.want.GPUShort, tt.want.GPUWait)
			}
		})
	}
	// The reason in words, as the compute and a waiting job say it.
	b := gpusShort(2, 1, 4, heldA)
	if got, want := (api.Blocks{b}).ForCompute(nil), "needs 2 GPUs; 1 of 4 free: 3 held by nodes of gpu-a"; got != want {
		t.Errorf("ForCompute = %q, want %q", got, want)
	}
	if got, want := b.ForJob(nil), api.GPUWaitPrefix+"needs 2 GPUs; 1 of 4 free: 3 held by nodes of gpu-a"; got != want {
		t.Errorf("ForJob = %q, want %q", got, want)
	}
}

func gpusShort(need, free, total int, held []api.GPUHolder) api.Block {
	return api.Block{Kind: api.BlockGPUs, GPUs: &api.GPUNeed{Need: need, Free: free, Total: total, Held: held}}
}

// TestHoldForBudgetClearsGPUs: a spent budget, not the devices, is what
// holds a cluster back then.
func TestHoldForBudgetClearsGPUs(t *testing.T) {
	budget := api.BudgetHold{Name: "b", Percent: 100, Amount: 10, Currency: "USD", Period: "Monthly"}
	c := Cluster{Max: 2, IdleTimeout: timeout, Headroom: -1, Queued: jobs("a"), GPUs: &GPUs{PerNode: 2, Free: 1, Total: 4},
		Budgets: []api.BudgetHold{budget}}
	p := Decide(c, t0)
	if p.GPUShort != 0 || p.GPUWait != nil || len(p.Blocked) != 1 || p.Blocked[0].Kind != api.BlockBudget {
		t.Errorf("held plan %s", show(p))
	}
}
