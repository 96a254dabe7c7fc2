package agent

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
)

func TestOfferedGPUs(t *testing.T) {
	found := gputest.Four()
	mig := agentapi.GPU{Index: 4, Name: "NVIDIA A100", UUID: "MIG-aaaa", MIG: "1g.10gb", MIGDevice: 2}
	found = append(found, mig)
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "2,3", "NVIDIA_VISIBLE_DEVICES": found[1].UUID, "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		spec string
		want []string // IDs; nil: none
		err  string
	}{
		{"", gpu.IDs(found), ""},
		{"all", gpu.IDs(found), ""},
		{"none", nil, ""},
		{"3,1", []string{"1", "3"}, ""},
		{found[2].UUID + ", 4:2", []string{"2", "4:2"}, ""},
		{"MIG-AAAA", []string{"4:2"}, ""},
		{"1,1", []string{"1"}, ""},
		{"env:CUDA_VISIBLE_DEVICES", []string{"2", "3"}, ""},
		{"env:NVIDIA_VISIBLE_DEVICES", []string{"1"}, ""},
		{"env:EMPTY", nil, ""},
		{"/var/run/nvidia-container-devices", gpu.IDs(found), ""}, // a pod's devices, mounted by NVIDIA's runtime
		{"env:UNSET", nil, ""},
		{"7", nil, `--gpu-devices names GPU "7", which this machine's nvidia-smi does not list (it lists: 0, 1, 2, 3, 4:2)`},
		{"4", nil, `names GPU "4"`}, // a MIG instance is not its GPU's index
	} {
		got, err := offeredGPUs(c.spec, found, getenv)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("offeredGPUs(%q) error %v, want %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("offeredGPUs(%q): %v", c.spec, err)
			continue
		}
		var ids []string
		if got != nil {
			ids = gpu.IDs(got)
		}
		if !reflect.DeepEqual(ids, c.want) {
			t.Errorf("offeredGPUs(%q) = %v, want %v", c.spec, ids, c.want)
		}
	}
	if _, err := offeredGPUs("env:X", nil, func(string) string { return "0" }); err == nil || !strings.Contains(err.Error(), "$X names GPU \"0\"") ||
		!strings.Contains(err.Error(), "it lists: none") {
		t.Errorf("a list naming a device of a machine without GPUs: %v", err)
	}
}

func TestGPUEnvAndContainerArgs(t *testing.T) {
	ds := []agentapi.GPU{{Index: 1, UUID: "GPU-1"}, {Index: 0, UUID: "MIG-x", MIG: "1g.10gb", MIGDevice: 1}}
	if got := gpuEnv(ds, true); !reflect.DeepEqual(got, []string{"CUDA_VISIBLE_DEVICES=1,MIG-x", "NVIDIA_VISIBLE_DEVICES=1,MIG-x", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}) {
		t.Errorf("gpuEnv = %v", got)
	}
	if got := gpuEnv(nil, true); !reflect.DeepEqual(got, []string{"CUDA_VISIBLE_DEVICES="}) {
		t.Errorf("gpuEnv(none) = %v: a job without devices must see none of the machine's", got)
	}
	if got := gpuEnv(nil, false); got != nil {
		t.Errorf("gpuEnv on a machine without GPUs = %v, want nothing", got)
	}
	env := []string{"A=1", "CUDA_VISIBLE_DEVICES=1,MIG-x", "NVIDIA_VISIBLE_DEVICES=1,MIG-x", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}
	args, own := containerGPUArgs(ds, env, true)
	if !reflect.DeepEqual(args, []string{"--gpus", `"device=GPU-1,MIG-x"`}) || !reflect.DeepEqual(own, []string{"A=1"}) {
		t.Errorf("containerGPUArgs = %v %v: the container gets its devices by UUID and sees them numbered from 0", args, own)
	}
	args, own = containerGPUArgs(nil, []string{"A=1", "CUDA_VISIBLE_DEVICES="}, true)
	if args != nil || !reflect.DeepEqual(own, []string{"A=1", "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"}) {
		t.Errorf("containerGPUArgs(none) = %v %v", args, own)
	}
}

// A node given some of the machine's GPUs offers only those: it registers
// them, its job is told them, and its figures are theirs.
func TestNodeOffersOnlyItsGPUs(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	four := gputest.Four()
	startAgent(t, f, func(c *Config) {
		c.DetectGPUs = func(context.Context) ([]agentapi.GPU, error) { return four, nil }
		c.GPUDevices = four[3].UUID + ",1"
		c.UsageInterval = time.Hour
		c.QueryGPUs = func(context.Context) ([]byte, error) {
			return []byte("0, 90, 1, 2\n1, 10, 1, 2\n2, 90, 1, 2\n3, 30, 1, 2\n"), nil
		}
	})
	f.waitFor(10*time.Second, "a poll with a sample", func() bool { return lastSample(f) != nil })
	f.mu.Lock()
	reg := gpu.IDs(f.regGPUs)
	u := f.polls[len(f.polls)-1].Usage
	f.mu.Unlock()
	if !reflect.DeepEqual(reg, []string{"1", "3"}) {
		t.Errorf("registered GPUs %v, want 1 and 3", reg)
	}
	if len(u.GPUs) != 2 || u.GPUs[0].Index != 1 || u.GPUs[1].Index != 3 {
		t.Errorf("the node's figures are of GPUs %+v, want 1 and 3 only", u.GPUs)
	}
	show := `echo "cuda=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset}"`
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "gpu", Attempt: 1, GPUs: []int{3, 1}, Command: show}})
	f.exited("gpu", 10*time.Second)
	if got := f.logOf("gpu"); got != "cuda=1,3 order=PCI_BUS_ID\n" {
		t.Errorf("the job saw %q", got)
	}
}

// A CPU node on a machine with GPUs offers none: it registers none, its
// job sees none, and it reports no GPU figures.
func TestCPUNodeSeesNoGPU(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	var queried atomic.Bool
	startAgent(t, f, func(c *Config) {
		c.DetectGPUs = func(context.Context) ([]agentapi.GPU, error) { return gputest.Four(), nil }
		c.GPUDevices = "none"
		c.UsageInterval = time.Hour
		c.QueryGPUs = func(context.Context) ([]byte, error) { queried.Store(true); return []byte("0, 90, 1, 2\n"), nil }
	})
	f.waitFor(10*time.Second, "a poll with a sample", func() bool { return lastSample(f) != nil })
	f.mu.Lock()
	reg, u := f.regGPUs, f.polls[len(f.polls)-1].Usage
	f.mu.Unlock()
	if len(reg) != 0 || len(u.GPUs) != 0 || queried.Load() {
		t.Errorf("a CPU node registered GPUs %v and reported %+v (nvidia-smi asked: %v)", reg, u.GPUs, queried.Load())
	}
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "cpu", Attempt: 1, Command: `echo "cuda=${CUDA_VISIBLE_DEVICES-unset}"`}})
	f.exited("cpu", 10*time.Second)
	if got := f.logOf("cpu"); got != "cuda=\n" {
		t.Errorf("the CPU job saw %q; want an empty CUDA_VISIBLE_DEVICES", got)
	}
}

// An agent told to offer a device the machine does not have does not
// start: it would claim a device it cannot reach.
func TestUnknownGPUDeviceRefused(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) {
		c.DetectGPUs = func(context.Context) ([]agentapi.GPU, error) { return gputest.Whole(1, "T4"), nil }
		c.GPUDevices = "0,5"
	})
	err := ra.wait(t, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), `names GPU "5"`) {
		t.Fatalf("Run = %v, want a refusal naming device 5", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registers != 0 {
		t.Error("the agent registered anyway")
	}
}

// lastSample is the usage the agent's latest poll carried (nil: none yet).
func lastSample(f *fakeServer) *agentapi.Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.polls) == 0 {
		return nil
	}
	return f.polls[len(f.polls)-1].Usage
}
