package docker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// A node container is given its own devices of the host's and no others,
// by UUID, and its agent is told to offer those; a CPU node gets none.
// (CI has no GPU: this checks the command line the engine is given.)
func TestNodeContainerGPUArgs(t *testing.T) {
	p := New(Options{BaseDir: t.TempDir()})
	four := gputest.Four()
	spec := provider.NodeSpec{NodeID: "g", VMSize: "Standard_NC12s_v3", VCPUs: 2, MemoryGB: 1, GPUs: 2,
		Devices: []agentapi.GPU{four[1], four[3]}, ServerURL: "http://127.0.0.1:1"}
	args := p.runArgs(spec, "/nodes/g", hostInfo{NCPU: 8, MemTotal: 16 << 30, NVIDIA: true}, nil)
	uuids := four[1].UUID + "," + four[3].UUID
	if i := slices.Index(args, "--gpus"); i < 0 || args[i+1] != `"device=`+uuids+`"` {
		t.Errorf("--gpus not the node's devices by UUID: %q", args)
	}
	if !slices.Contains(args, provider.GPUDevicesEnv+"="+uuids) || !slices.Contains(args, LabelGPUDevices+"=1,3") {
		t.Errorf("the agent is not told its devices, or the label is missing: %q", args)
	}
	spec.GPUs, spec.Devices = 0, nil
	args = p.runArgs(spec, "/nodes/g", hostInfo{NCPU: 8, MemTotal: 16 << 30, NVIDIA: true}, nil)
	if slices.Contains(args, "--gpus") || !slices.Contains(args, provider.GPUDevicesEnv+"=none") {
		t.Errorf("a CPU node's container: %q", args)
	}
}

// An engine that cannot give containers GPUs offers none, and says why.
func TestMachineWithoutContainerGPUs(t *testing.T) {
	dir := t.TempDir()
	path, err := gputest.StandIn(dir, gputest.Four())
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{BaseDir: t.TempDir(), GPUs: gpu.NvidiaSMI{Path: path}})
	p.host = &hostInfo{NCPU: 8, NVIDIA: false}
	m, err := p.Machine(context.Background())
	if err != nil || len(m.Devices) != 0 || !strings.Contains(m.Why, "cannot give containers GPUs") {
		t.Fatalf("Machine = %+v, %v", m, err)
	}
	p.host.NVIDIA = true
	if m, err = p.Machine(context.Background()); err != nil || len(m.Devices) != 4 {
		t.Fatalf("Machine with NVIDIA's toolkit = %+v, %v; want the four GPUs", m, err)
	}
}
