package metrics

import (
	"context"
	"fmt"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/metrics/promtext"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var (
	famGPUHeld = newGauge(Namespace+"_node_gpu_held",
		"1 for each device of the machine the nodes share that a node holds (local and docker providers): gpu is its ID there (\"2\", \"0:1\" for a MIG instance).", "workspace", "compute", "node", "gpu", "model")
	famGPUFree = newGauge(Namespace+"_machine_gpus_free",
		"Devices of the machine the nodes share that no node holds.")
	famGPUTotal = newGauge(Namespace+"_machine_gpus",
		"Devices of the machine the nodes share.")
)

// gpuCollector says at scrape time which node holds which of the
// machine's devices, from the allocations the store records (a few rows:
// at most one per device).
type gpuCollector struct {
	db      *store.DB
	machine gpu.Machine
}

func (c *gpuCollector) Families() []*promtext.Family {
	return []*promtext.Family{famGPUHeld, famGPUFree, famGPUTotal}
}

func (c *gpuCollector) Collect(ctx context.Context, s *promtext.Scrape) error {
	nodes, err := store.NodesHoldingGPUs(ctx, c.db.Q())
	if err != nil {
		return fmt.Errorf("nodes holding GPUs: %w", err)
	}
	byID := map[string]agentapi.GPU{}
	for _, d := range c.machine.Devices {
		byID[gpu.ID(d)] = d
	}
	held := 0
	for _, n := range nodes {
		ws, comp := labels(n.Compute)
		for _, id := range n.GPUDevices {
			d, ok := byID[id]
			if !ok {
				continue
			}
			delete(byID, id) // a device counted once
			held++
			model := d.Name
			if d.MIG != "" {
				model = "MIG " + d.MIG + " of " + d.Name
			}
			s.Add(famGPUHeld, 1, ws, comp, n.ID, id, model)
		}
	}
	s.Add(famGPUFree, float64(len(c.machine.Devices)-held))
	s.Add(famGPUTotal, float64(len(c.machine.Devices)))
	return nil
}
