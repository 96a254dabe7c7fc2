package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// sized is a compute of a VM size with min 0.
func (h *harness) sized(name, size string, max int32, idle string) api.Compute {
	h.t.Helper()
	min := int32(0)
	c := api.Compute{Name: name, Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: size,
			ScaleSettings: &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}}}}
	if err := api.PrepareCompute(&c, name, nil, "local"); err != nil {
		h.t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = h.sc.ComputeID(name), api.StateSucceeded
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), name, c, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// withGPUs gives the harness's provider a machine of four GPUs (as a
// stand-in nvidia-smi would report them) that its nodes share.
func (h *harness) withGPUs() {
	h.c.GPUs = &gpu.Machine{Devices: gputest.Four()}
}

// heldDevices are the devices each live node of the computes holds, by
// node, checked against what the provider was told.
func (h *harness) heldDevices(cs ...api.Compute) map[string][]string {
	h.t.Helper()
	out := map[string][]string{}
	for _, c := range cs {
		for _, n := range h.nodes(c) {
			out[n.ID] = n.GPUDevices
			spec, ok := h.prov.Node(n.ID)
			if ok && !slices.Equal(gpu.IDs(spec.Devices), n.GPUDevices) {
				h.t.Errorf("node %s holds %v but the provider was given %v", n.ID, n.GPUDevices, gpu.IDs(spec.Devices))
			}
		}
	}
	return out
}

// disjoint fails unless no device is held twice; it returns how many are.
func disjoint(t testing.TB, held map[string][]string) int {
	t.Helper()
	by := map[string]string{}
	for node, ds := range held {
		for _, d := range ds {
			if other, ok := by[d]; ok {
				t.Errorf("GPU %s held by %s and %s", d, other, node)
			}
			by[d] = node
		}
	}
	return len(by)
}

// Nodes of 1- and 2-GPU sizes on one machine each hold devices of their
// own; a CPU node holds none.
func TestGPUsDividedAmongNodes(t *testing.T) {
	h := newHarness(t)
	h.withGPUs()
	g1 := h.sized("gpu1", "Standard_NC6s_v3", 2, "PT60S")
	g2 := h.sized("gpu2", "Standard_NC12s_v3", 1, "PT60S")
	cpu := h.sized("cpu", "Standard_DS3_v2", 1, "PT60S")
	h.submit(g1, 1)
	h.submit(g1, 1)
	h.submit(g2, 1)
	h.submit(cpu, 1)
	h.pass()
	held := h.heldDevices(g1, g2, cpu)
	if n := disjoint(t, held); n != 4 {
		t.Errorf("%d GPUs held, want all 4: %v", n, held)
	}
	for _, n := range h.nodes(cpu) {
		if len(n.GPUDevices) != 0 {
			t.Errorf("the CPU node holds %v", n.GPUDevices)
		}
	}
	for _, n := range h.nodes(g2) {
		if len(n.GPUDevices) != 2 {
			t.Errorf("the 2-GPU node holds %v", n.GPUDevices)
		}
	}
	_, evs := h.history(g2)
	if !slices.ContainsFunc(evs, func(e store.Event) bool {
		return e.Type == api.EventNodeRequested && strings.Contains(e.Message, "holding GPU ")
	}) {
		t.Error("the history does not say which devices the node holds")
	}
}

// A node that cannot get its devices now is not created: the compute's
// ScaleUpBlocked, its queued job and its history say why, in words made
// from the reason's value; once devices are free (here: the other
// cluster's idle nodes, released early for it) it is created and the
// job's message goes.
func TestGPUNodeWaitsAndStartsWhenDevicesFree(t *testing.T) {
	h := newHarness(t)
	h.withGPUs()
	a := h.sized("gpu-a", "Standard_NC6s_v3", 3, "PT3600S")
	b := h.sized("gpu-b", "Standard_NC12s_v3", 1, "PT3600S")
	ja := []string{h.submit(a, 1), h.submit(a, 1), h.submit(a, 1)}
	h.pass()
	h.register(a)
	h.pass() // a's jobs start on its 3 nodes
	jb := h.submit(b, 1)
	h.pass()
	const why = "needs 2 GPUs; 1 of 4 free: 3 held by nodes of gpu-a"
	if n := len(h.nodes(b)); n != 0 {
		t.Fatalf("gpu-b has %d nodes with 1 GPU free; want none (nothing half-allocated)", n)
	}
	if got := errorCodes(h.storedCompute(b))["ScaleUpBlocked"]; got != "queued jobs wait: "+why {
		t.Errorf("ScaleUpBlocked = %q", got)
	}
	if got := h.message(jb); got != api.GPUWaitPrefix+why {
		t.Errorf("job message = %q", got)
	}
	_, evs := h.history(b)
	if !slices.ContainsFunc(evs, func(e store.Event) bool { return e.Type == api.EventScaleUpBlocked && strings.Contains(e.Message, why) }) {
		t.Errorf("the history does not record the wait: %v", evs)
	}

	// Two of a's jobs end: its nodes are idle, with an hour of idle time
	// left, but gpu-b waits for their devices: they go now, and gpu-b's
	// node is created (in the same pass or the next one).
	h.clk.Step(time.Second)
	h.finish(ja[0], 0)
	h.finish(ja[1], 0)
	h.heartbeat(a)
	h.pass()
	h.pass()
	if n := len(h.nodes(b)); n != 1 {
		t.Fatalf("gpu-b has %d nodes once gpu-a's idle nodes were released, want 1", n)
	}
	if got := len(h.nodes(a)); got != 2 {
		t.Errorf("gpu-a kept %d nodes; want 2: the busy one and one idle (only as many released as gpu-b waits for)", got)
	}
	if n := disjoint(t, h.heldDevices(a, b)); n != 4 {
		t.Errorf("%d GPUs held, want 4: gpu-a's two nodes and gpu-b's two devices", n)
	}
	if got := h.message(jb); got != "" {
		t.Errorf("job message %q after its node was created, want none", got)
	}
	if _, ok := errorCodes(h.storedCompute(b))["ScaleUpBlocked"]; ok {
		t.Error("gpu-b still says it is blocked")
	}
}

// A restarted control plane keeps the allocations the store records: new
// nodes never take devices that running nodes hold.
func TestGPUAllocationsSurviveRestart(t *testing.T) {
	h := newHarness(t)
	h.withGPUs()
	a := h.sized("gpu-a", "Standard_NC12s_v3", 1, "PT3600S")
	h.submit(a, 1)
	h.pass()
	h.register(a)
	h.pass()
	before := h.heldDevices(a)

	h.c = h.newClusters() // the control plane restarts
	h.withGPUs()
	if err := h.c.Reconcile(h.ctx); err != nil {
		t.Fatal(err)
	}
	b := h.sized("gpu-b", "Standard_NC6s_v3", 4, "PT3600S")
	for range 4 {
		h.submit(b, 1)
	}
	h.heartbeat(a)
	h.pass()
	held := h.heldDevices(a, b)
	for node, ds := range before {
		if !slices.Equal(held[node], ds) {
			t.Errorf("node %s held %v before the restart, %v after", node, ds, held[node])
		}
	}
	if n := disjoint(t, held); n != 4 {
		t.Errorf("%d GPUs held, want 4", n)
	}
	if got := len(h.nodes(b)); got != 2 {
		t.Errorf("gpu-b got %d nodes, want the 2 the free devices allow", got)
	}
}

// A node whose machine is gone frees its devices at once: the next pass
// removes it and gives its devices to the node that waited.
func TestKilledNodeFreesItsDevices(t *testing.T) {
	h := newHarness(t)
	h.withGPUs()
	a := h.sized("gpu-a", "Standard_NC24s_v3", 1, "PT3600S")
	h.submit(a, 1)
	h.pass()
	h.register(a)
	h.pass()
	b := h.sized("gpu-b", "Standard_NC6s_v3", 1, "PT3600S")
	jb := h.submit(b, 1)
	h.pass()
	if len(h.nodes(b)) != 0 || !strings.HasPrefix(h.message(jb), api.GPUWaitPrefix) {
		t.Fatalf("gpu-b: %d nodes, job message %q; want it waiting for GPUs", len(h.nodes(b)), h.message(jb))
	}
	dead := h.nodes(a)[0]
	if err := h.c.HandleProviderEvent(h.ctx, provider.Event{NodeID: dead.ID, Kind: provider.EventGone, Reason: "the agent was killed"}); err != nil {
		t.Fatal(err)
	}
	h.pass()
	nb := h.nodes(b)
	if len(nb) != 1 || len(nb[0].GPUDevices) != 1 {
		t.Fatalf("gpu-b nodes %+v after the 4-GPU node died; want one holding a device", nb)
	}
	if slices.ContainsFunc(h.nodes(a), func(n store.Node) bool { return n.ID == dead.ID }) {
		t.Error("the dead node's record is still there")
	}
	disjoint(t, h.heldDevices(a, b))
	// The dead node's job went back to the queue: gpu-a now waits for
	// the device gpu-b holds.
	h.pass()
	want := "queued jobs wait: needs 4 GPUs; 3 of 4 free: 1 held by nodes of gpu-b"
	if got := errorCodes(h.storedCompute(a))["ScaleUpBlocked"]; got != want {
		t.Errorf("gpu-a ScaleUpBlocked = %q, want %q", got, want)
	}
}

// BenchmarkPassGPUs: one pass over 60 clusters of a 1-GPU size sharing a
// machine of 8 GPUs split in 7 MIG instances each (56 devices): 56 nodes
// hold a device each, 4 clusters wait for one. Beside it the same pass
// without a machine to divide (60 nodes, none waits): the difference is
// what dividing the machine adds to a pass (the pool made from the store's
// allocations, each cluster's supply, the waiting ones' reasons).
//
//	go test ./internal/controller/ -run '^$' -bench PassGPUs -benchtime 20x -benchmem
func BenchmarkPassGPUs(b *testing.B) {
	var devs []agentapi.GPU
	for g := range 8 {
		for m := range 7 {
			devs = append(devs, agentapi.GPU{Index: g, Name: "NVIDIA A100-SXM4-80GB", UUID: fmt.Sprintf("MIG-%d-%d", g, m), MIG: "1g.10gb", MIGDevice: m})
		}
	}
	for _, bc := range []struct {
		name    string
		machine *gpu.Machine
		nodes   int
	}{{"shared-machine", &gpu.Machine{Devices: devs}, 56}, {"no-machine", nil, 60}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b)
			h.c.GPUs = bc.machine
			var cs []api.Compute
			for i := range 60 {
				c := h.sized(fmt.Sprintf("g%02d", i), "Standard_NC6s_v3", 1, "PT3600S")
				h.submit(c, 1)
				cs = append(cs, c)
			}
			h.pass()
			for _, c := range cs {
				h.register(c)
			}
			h.pass()
			nodes := 0
			for _, c := range cs {
				nodes += len(h.nodes(c))
			}
			if nodes != bc.nodes {
				b.Fatalf("%d nodes, want %d", nodes, bc.nodes)
			}
			b.ResetTimer()
			for range b.N {
				h.pass()
			}
		})
	}
}
