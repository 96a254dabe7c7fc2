package agentapi

import (
	"fmt"
	"testing"
)

// The store's compact GPU list reads back as written: indexes in order,
// an unknown utilization as unknown, memory as written.
func TestGPUListRoundTrip(t *testing.T) {
	u := 0.875
	s := FormatGPUs([]GPUUsage{{Index: 0, Utilization: &u, MemoryUsed: 31457280000}, {Index: 3, MemoryUsed: 5}})
	if s != "0:0.875:31457280000,3::5" {
		t.Fatalf("FormatGPUs = %q", s)
	}
	var got []string
	EachGPU(s+",junk,:1:2", func(idx string, util float64, ok bool, mem string) {
		got = append(got, fmt.Sprintf("%s %v %v %s", idx, util, ok, mem))
	})
	if fmt.Sprint(got) != "[0 0.875 true 31457280000 3 0 false 5]" {
		t.Errorf("EachGPU read %v", got)
	}
	if mean, ok := GPUUtilization([]GPUUsage{{Utilization: &u}, {}}); !ok || mean != u {
		t.Errorf("GPUUtilization = %v, %v; want the one GPU that reports", mean, ok)
	}
	if _, ok := GPUUtilization(nil); ok {
		t.Error("no GPUs have a utilization")
	}
}
