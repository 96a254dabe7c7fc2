package controller

import (
	"context"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The devices of the machine a provider's nodes share (Clusters.GPUs):
// each pass makes a gpu.Pool from the allocations the store records,
// gives each cluster of a GPU size its supply as an input of decide,
// hands the nodes it creates devices of their own (recorded with the node
// before the provider is called) and frees those of the nodes it removes.

// gpuWant is what a cluster's nodes waited for at its last decision.
type gpuWant struct {
	devices int    // devices missing for the nodes it could not create
	model   string // its size's GPU model
}

// gpuPool is the pass's pool: the machine's devices, held as the store's
// node records say; nil when the provider's nodes share no machine.
func (c *Clusters) gpuPool(states []clusterState) *gpu.Pool {
	if c.GPUs == nil {
		return nil
	}
	pool := gpu.NewPool(*c.GPUs)
	for _, st := range states {
		for _, n := range st.nodes {
			if len(n.GPUDevices) > 0 && n.Provider == c.Provider.Name() {
				pool.Hold(gpu.Holder{Node: n.ID, Compute: n.Compute}, n.GPUDevices)
			}
		}
	}
	return pool
}

// gpuSupply is a cluster's snapshot of the pool: nil for a CPU size or
// without a pool. Wanted counts the devices other clusters' nodes waited
// for at their last decision (with strict model matching, only those of
// the same model).
func (c *Clusters) gpuSupply(pool *gpu.Pool, comp api.Compute) *decide.GPUs {
	size, ok := catalog.Lookup(comp.Aml().VMSize)
	if pool == nil || !ok || size.GPUs <= 0 {
		return nil
	}
	s := pool.Supply(size.GPUModel)
	g := &decide.GPUs{PerNode: size.GPUs, Free: s.Free, Total: s.Total}
	for _, h := range s.Held {
		g.Held = append(g.Held, api.GPUHolder{Compute: computeName(h.Compute), Devices: h.Devices})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.gpuWants {
		if id != comp.ID && (pool.Machine().Match != gpu.MatchStrict || strings.EqualFold(w.model, size.GPUModel)) {
			g.Wanted += w.devices
		}
	}
	return g
}

// noteGPUWant records what a cluster's plan left its nodes waiting for.
func (c *Clusters) noteGPUWant(comp api.Compute, supply *decide.GPUs, plan decide.Plan) (waits bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if supply == nil || plan.GPUShort <= 0 {
		delete(c.gpuWants, comp.ID)
		return false
	}
	size, _ := catalog.Lookup(comp.Aml().VMSize)
	// The devices missing: what the nodes not created need beyond those
	// left free after the ones created.
	left := supply.Free - plan.Create*supply.PerNode
	c.gpuWants[comp.ID] = gpuWant{devices: max(plan.GPUShort*supply.PerNode-left, 1), model: size.GPUModel}
	return true
}

// forgetGPUWants drops the wants of computes that are gone.
func (c *Clusters) forgetGPUWants(docs []store.Doc[api.Compute]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.gpuWants {
		found := false
		for _, d := range docs {
			found = found || d.Value.ID == id
		}
		if !found {
			delete(c.gpuWants, id)
		}
	}
}

// takeGPUs gives a node about to be created its devices from the pool:
// none for a CPU size or without a pool; ok false when too few are free
// (the decision counted them, so only a pool changed since says so).
func takeGPUs(pool *gpu.Pool, size catalog.Size, n store.Node) (devices []agentapi.GPU, ok bool) {
	if pool == nil || size.GPUs <= 0 {
		return nil, true
	}
	return pool.Take(gpu.Holder{Node: n.ID, Compute: n.Compute}, size.GPUs, size.GPUModel)
}

// checkGPUAllocations says, when the control plane starts, which
// recorded allocations the machine cannot honour (a device gone, or held
// twice); their nodes keep running on what they were given.
func (c *Clusters) checkGPUAllocations(ctx context.Context, nodes []store.Node) {
	if c.GPUs == nil {
		return
	}
	pool := gpu.NewPool(*c.GPUs)
	held := 0
	for _, n := range nodes {
		if len(n.GPUDevices) == 0 || n.Provider != c.Provider.Name() {
			continue
		}
		held += len(n.GPUDevices)
		if bad := pool.Hold(gpu.Holder{Node: n.ID, Compute: n.Compute}, n.GPUDevices); len(bad) > 0 {
			c.Log.Warn("a node holds GPUs this machine does not list, or another node holds too", "node", n.ID, "devices", strings.Join(bad, ","),
				"machine", gpu.Summary(c.GPUs.Devices))
		}
	}
	c.Log.Info("GPU allocations kept", "held", held, "of", len(c.GPUs.Devices))
}

// computeName is the name in a compute's ARM id.
func computeName(id string) string { return id[strings.LastIndex(id, "/")+1:] }

// gpuNeed is what the plan's nodes that could not be placed need of the
// machine's devices; nil when devices did not bind.
func gpuNeed(plan decide.Plan) *api.GPUNeed {
	for _, b := range plan.Blocked {
		if b.Kind == api.BlockGPUs {
			return b.GPUs
		}
	}
	return nil
}
