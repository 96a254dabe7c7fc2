package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Config.GPUDevices values besides a list of devices.
const (
	// GPUDevicesAll offers every device the agent finds (a machine
	// joined by hand); "" means the same.
	GPUDevicesAll = "all"
	// GPUDevicesNone offers none (a CPU node on a machine with GPUs).
	GPUDevicesNone = "none"
	// GPUDevicesEnv prefixes the name of a variable that lists the
	// devices: "env:CUDA_VISIBLE_DEVICES", what Slurm sets for a job given
	// GPUs. An unset or empty variable offers none.
	GPUDevicesEnv = "env:"
)

// offeredGPUs are the devices of found that a node offers, by spec
// (Config.GPUDevices): a comma-separated list of devices, each named by
// index or UUID; "all" or ""; "none"; or "env:NAME". A name that is none
// of the found devices is an error: a node must not run jobs on devices
// it was not given, nor claim devices it cannot reach.
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
	case GPUDevicesNone:
		return nil, nil
	}
	offered := make([]bool, len(found))
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := -1
		for k, d := range found {
			if strconv.Itoa(d.Index) == name || (d.UUID != "" && d.UUID == name) {
				i = k
			}
		}
		if i < 0 {
			have := make([]string, len(found))
			for k, d := range found {
				have[k] = strconv.Itoa(d.Index)
			}
			return nil, fmt.Errorf("%s names GPU %q, which this machine's nvidia-smi does not list (it lists: %s)", from, name, or(strings.Join(have, ", "), "none"))
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

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
