package kubernetes

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// A GPU node pod's agent offers the devices NVIDIA's device plugin gave
// the pod; a CPU node pod sees none, even where NVIDIA's runtime is the
// default and the image asks for all.
func TestPodGPUDevices(t *testing.T) {
	p := testProvider()
	env := func(pod *Pod) map[string]string {
		m := map[string]string{}
		for _, e := range pod.Spec.Containers[0].Env {
			m[e.Name] = e.Value
		}
		return m
	}
	gpuPod, _ := p.podFor(provider.NodeSpec{NodeID: "g", ComputeID: "c", VMSize: "Standard_NC12s_v3", VCPUs: 12, MemoryGB: 224, GPUs: 2, JoinToken: "j"})
	if e := env(gpuPod); e[provider.GPUDevicesEnv] != "env:NVIDIA_VISIBLE_DEVICES" || e["NVIDIA_VISIBLE_DEVICES"] != "" {
		t.Errorf("GPU pod env %v", e)
	}
	if q := gpuPod.Spec.Containers[0].Resources.Limits[GPUResource]; q != "2" {
		t.Errorf("GPU pod limit %s", q)
	}
	cpuPod, _ := p.podFor(provider.NodeSpec{NodeID: "c", ComputeID: "c", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14, JoinToken: "j"})
	if e := env(cpuPod); e[provider.GPUDevicesEnv] != "none" || e["NVIDIA_VISIBLE_DEVICES"] != "void" {
		t.Errorf("CPU pod env %v", e)
	}
}
