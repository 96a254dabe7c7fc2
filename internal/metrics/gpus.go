package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var (
	descGPUHeld = prometheus.NewDesc(Namespace+"_node_gpu_held",
		"1 for each device of the machine the nodes share that a node holds (local and docker providers): gpu is its ID there (\"2\", \"0:1\" for a MIG instance).",
		[]string{"workspace", "compute", "node", "gpu", "model"}, nil)
	descGPUFree = prometheus.NewDesc(Namespace+"_machine_gpus_free",
		"Devices of the machine the nodes share that no node holds.", nil, nil)
	descGPUTotal = prometheus.NewDesc(Namespace+"_machine_gpus",
		"Devices of the machine the nodes share.", nil, nil)
)

// gpuCollector says at scrape time which node holds which of the
// machine's devices, from the allocations the store records (a few rows:
// at most one per device).
type gpuCollector struct {
	db      *store.DB
	machine gpu.Machine
	log     *slog.Logger
	timeout time.Duration
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGPUHeld
	ch <- descGPUFree
	ch <- descGPUTotal
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	nodes, err := store.NodesHoldingGPUs(ctx, c.db.Q())
	if err != nil {
		c.log.Warn("metrics scrape", "err", err)
		ch <- prometheus.NewInvalidMetric(descGPUHeld, err)
		return
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
			ch <- prometheus.MustNewConstMetric(descGPUHeld, prometheus.GaugeValue, 1, ws, comp, n.ID, id, model)
		}
	}
	ch <- prometheus.MustNewConstMetric(descGPUFree, prometheus.GaugeValue, float64(len(c.machine.Devices)-held))
	ch <- prometheus.MustNewConstMetric(descGPUTotal, prometheus.GaugeValue, float64(len(c.machine.Devices)))
}
