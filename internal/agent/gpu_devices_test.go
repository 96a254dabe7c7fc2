package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// A node offers the devices it was given, in the machine's order: by list,
// from a variable (Slurm's CUDA_VISIBLE_DEVICES), all, or none; a device
// the machine does not have is an error, never offered.
func TestOfferedGPUs(t *testing.T) {
	found := []agentapi.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "GPU-c"}, {Index: 3, UUID: "GPU-d"}}
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "3,1", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	indexes := func(ds []agentapi.GPU) []int {
		out := []int{}
		for _, d := range ds {
			out = append(out, d.Index)
		}
		return out
	}
	for spec, want := range map[string][]int{
		"": {0, 1, 2, 3}, "all": {0, 1, 2, 3}, "none": {}, "2,0": {0, 2}, "GPU-b": {1},
		"env:CUDA_VISIBLE_DEVICES": {1, 3}, "env:EMPTY": {}, "env:UNSET": {},
	} {
		got, err := offeredGPUs(spec, found, getenv)
		if err != nil {
			t.Errorf("offeredGPUs(%q) = %v", spec, err)
			continue
		}
		if g := indexes(got); !slices.Equal(g, want) {
			t.Errorf("offeredGPUs(%q) = %v; want %v", spec, g, want)
		}
	}
	env["CUDA_VISIBLE_DEVICES"] = "1,7"
	if _, err := offeredGPUs("env:CUDA_VISIBLE_DEVICES", found, getenv); err == nil || !strings.Contains(err.Error(), `$CUDA_VISIBLE_DEVICES names GPU "7"`) {
		t.Errorf("a device the machine lacks: %v; want an error naming it", err)
	}
	if _, err := offeredGPUs("0", nil, getenv); err == nil || !strings.Contains(err.Error(), "lists: none") {
		t.Errorf("a device on a machine without GPUs: %v", err)
	}
}
