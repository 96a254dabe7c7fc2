package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu"
)

// Config.GPUDevices values besides a list of devices.
const (
	// GPUDevicesAll offers every device the agent finds (a machine
	// joined by hand); "" means the same.
	GPUDevicesAll = "all"
	// GPUDevicesNone offers none (a CPU node on a machine with GPUs).
	GPUDevicesNone = "none"
	// GPUDevicesEnv prefixes the name of a variable that lists the
	// devices: "env:CUDA_VISIBLE_DEVICES" (what Slurm sets for a job
	// given GPUs), "env:NVIDIA_VISIBLE_DEVICES" (what NVIDIA's device
	// plugin sets in a pod). An unset or empty variable offers none.
	GPUDevicesEnv = "env:"
)

// offeredGPUs are the devices of found that a node offers, by spec
// (Config.GPUDevices): a comma-separated list of devices, each named by
// index, ID ("0:1", a MIG instance) or UUID; "all" or ""; "none"; or
// "env:NAME". A name that is none of the found devices is an error: a
// node must not run jobs on devices it was not given, nor claim devices
// it cannot reach.
func offeredGPUs(spec string, found []agentapi.GPU, getenv func(string) string) ([]agentapi.GPU, error) {
	list, from := strings.TrimSpace(spec), "--gpu-devices"
	if name, ok := strings.CutPrefix(list, GPUDevicesEnv); ok {
		list, from = strings.TrimSpace(getenv(name)), "$"+name
		if list == "" {
			return nil, nil
		}
	}
	switch strings.ToLower(list) {
	case "", GPUDevicesAll:
		return found, nil
	case "/var/run/nvidia-container-devices":
		// NVIDIA's device plugin with its volume-mounts strategy: the
		// runtime mounted the pod's devices, the only ones it sees.
		return found, nil
	case GPUDevicesNone, "void", "nodevfiles": // the last two: NVIDIA_VISIBLE_DEVICES's words for none
		return nil, nil
	}
	offered := make([]bool, len(found))
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(found, func(d agentapi.GPU) bool { return gpu.Names(d, name) })
		if i < 0 {
			have := "none"
			if len(found) > 0 {
				have = strings.Join(gpu.IDs(found), ", ")
			}
			return nil, fmt.Errorf("%s names GPU %q, which this machine's nvidia-smi does not list (it lists: %s)", from, strings.TrimSpace(name), have)
		}
		offered[i] = true
	}
	var out []agentapi.GPU // in the machine's order, whatever the list's
	for i, d := range found {
		if offered[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

// jobGPUs are the node's devices given to a job: those on the GPUs the
// assignment names by index (a MIG instance is on its GPU's index).
func (j *job) jobGPUs() []agentapi.GPU {
	var out []agentapi.GPU
	for _, d := range j.a.gpus {
		if slices.Contains(j.asg.GPUs, d.Index) {
			out = append(out, d)
		}
	}
	return out
}

// gpuEnv is what a job's processes are told of their devices: the list
// in CUDA_VISIBLE_DEVICES (and NVIDIA_VISIBLE_DEVICES), numbered in the
// PCI bus order nvidia-smi uses (CUDA_DEVICE_ORDER), or, when it has none
// on a machine that has some (others'), an empty CUDA_VISIBLE_DEVICES, so
// that CUDA shows it none of them.
func gpuEnv(ds []agentapi.GPU, machineHasGPUs bool) []string {
	if len(ds) == 0 {
		if !machineHasGPUs {
			return nil
		}
		return []string{"CUDA_VISIBLE_DEVICES="}
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = gpu.Visible(d)
	}
	list := strings.Join(names, ",")
	return []string{"CUDA_VISIBLE_DEVICES=" + list, "NVIDIA_VISIBLE_DEVICES=" + list, "CUDA_DEVICE_ORDER=PCI_BUS_ID"}
}

// containerGPUArgs are the docker run flags that give a job's container
// its devices, by the names that hold outside the node too (UUIDs: inside
// a node container its devices are numbered from 0), and env is the
// job's environment made right for it: inside the container its devices
// are all it sees, numbered from 0, so the process variables go; a
// container without devices on a machine with some gets
// NVIDIA_VISIBLE_DEVICES=void, which NVIDIA's runtime, where it is the
// engine's default, reads as none.
func containerGPUArgs(ds []agentapi.GPU, env []string, machineHasGPUs bool) (args, outEnv []string) {
	outEnv = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER"
	})
	if len(ds) == 0 {
		if !machineHasGPUs {
			return nil, outEnv
		}
		return nil, append(outEnv, "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void")
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = gpu.Stable(d)
	}
	return []string{"--gpus", strconv.Quote("device=" + strings.Join(names, ","))}, outEnv
}

// measuredGPUs are the indexes of the node's devices that nvidia-smi
// measures: its whole GPUs. A MIG instance has no utilization of its own
// in nvidia-smi's query (its GPU's is shared with other instances, maybe
// other nodes'), so it is left out.
func measuredGPUs(ds []agentapi.GPU) []int {
	var out []int
	for _, d := range ds {
		if d.MIG == "" {
			out = append(out, d.Index)
		}
	}
	return out
}
