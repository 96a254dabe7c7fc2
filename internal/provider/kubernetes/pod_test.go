package kubernetes

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

func TestPodNameIsValidAndDistinct(t *testing.T) {
	ids := []string{"tvm-gpu-1a2b3c4d_20261121t101500z", "ptest-00ff", "Node_A", "node_a", "a.b-c", strings.Repeat("x", 200)}
	seen := map[string]string{}
	for _, id := range ids {
		name := PodName(id)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("PodName(%q) = %q: not a valid pod name: %v", id, name, errs)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("PodName(%q) = PodName(%q) = %q", id, other, name)
		}
		seen[name] = id
		if PodName(id) != name {
			t.Errorf("PodName(%q) is not stable", id)
		}
	}
	if got := PodName("ptest-00ff"); got != "cumulus-ptest-00ff" {
		t.Errorf("a DNS-safe node id should be kept readable: got %q", got)
	}
}

func TestLabelValueIsValid(t *testing.T) {
	for _, s := range []string{"Standard_DS3_v2", "tvm-gpu-1_20261121t101500z", "/subscriptions/x/computes/gpu", strings.Repeat("a", 80), "-x-"} {
		v := labelValue(s)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", s, v, errs)
		}
	}
	if got := labelValue("Standard_DS3_v2"); got != "Standard_DS3_v2" {
		t.Errorf("a valid label value should be kept: got %q", got)
	}
}

func testProvider() *Provider {
	return &Provider{o: Options{Namespace: "ml", Image: "registry.local/cumulus-node:1", PullPolicy: "IfNotPresent",
		Owner: "/var/lib/cumulus", StopGrace: 40 * time.Second, LowPriorityClass: DefaultLowPriorityClass}, ownerLabel: "o1"}
}

func TestPodForGPUSizeLowPriority(t *testing.T) {
	p := testProvider()
	secs := int64(60)
	spec := provider.NodeSpec{NodeID: "tvm-gpu-1", ComputeID: "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/computes/gpu",
		VMSize: "Standard_NC6s_v3", VCPUs: 6, MemoryGB: 112, GPUs: 1, LowPriority: true, ServerURL: "https://cp:8787",
		JoinToken: "secret-join-token", GracePeriod: 75 * time.Second,
		Kubernetes: &api.KubernetesPlacement{NodeSelector: map[string]string{"pool": "gpu"},
			Tolerations: []api.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}}}}
	p.o.CAPEM = []byte("CA PEM")
	pod, secret := p.podFor(spec)

	c := pod.Spec.Containers[0]
	for res, want := range map[string]string{ResourceCPU: "6", ResourceMemory: "112Gi", GPUResource: "1"} {
		if q := c.Resources.Requests[res]; q != want {
			t.Errorf("request %s = %s; want %s", res, q, want)
		}
		if q := c.Resources.Limits[res]; q != want {
			t.Errorf("limit %s = %s; want %s", res, q, want)
		}
	}
	if pod.Spec.PriorityClassName != DefaultLowPriorityClass {
		t.Errorf("low-priority node pod has priority class %q", pod.Spec.PriorityClassName)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 75 {
		t.Errorf("terminationGracePeriodSeconds = %v; want 75 (the node's grace period)", g)
	}
	if pod.Spec.NodeSelector["pool"] != "gpu" || len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Key != "nvidia.com/gpu" ||
		pod.Spec.Tolerations[0].Operator != "Exists" || *pod.Spec.Tolerations[0].TolerationSeconds != 60 {
		t.Errorf("placement not applied: selector %v tolerations %+v", pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	if pod.Spec.RestartPolicy != "Never" {
		t.Errorf("restart policy %s; a node pod must not restart (the node is gone when its agent exits)", pod.Spec.RestartPolicy)
	}
	if pod.Annotations[AnnotationNode] != "tvm-gpu-1" || pod.Annotations[AnnotationCompute] != spec.ComputeID {
		t.Errorf("annotations %v do not carry the node and compute ids", pod.Annotations)
	}
	if pod.Labels[LabelCompute] != "gpu" || pod.Labels[LabelOwner] != "o1" || pod.Labels[LabelLowPriority] != "true" {
		t.Errorf("labels %v", pod.Labels)
	}
	// The join token and CA travel in the secret, never in the pod spec.
	if string(secret.Data[secretTokenKey]) != "secret-join-token" || string(secret.Data[secretCAKey]) != "CA PEM" {
		t.Errorf("secret data %v", secret.Data)
	}
	for _, e := range c.Env {
		if strings.Contains(e.Value, "secret-join-token") {
			t.Errorf("env %s holds the join token in the pod spec", e.Name)
		}
		if e.Name == "CUMULUS_JOIN_TOKEN" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != pod.Name) {
			t.Errorf("CUMULUS_JOIN_TOKEN should come from the node's secret: %+v", e)
		}
	}
	if strings.Contains(strings.Join(c.Args, " "), "secret-join-token") {
		t.Error("the join token is in the container's arguments")
	}
}

func TestPodForCPUSizeDedicated(t *testing.T) {
	p := testProvider()
	pod, secret := p.podFor(provider.NodeSpec{NodeID: "n1", ComputeID: "c", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14, JoinToken: "j"})
	c := pod.Spec.Containers[0]
	if _, ok := c.Resources.Limits[GPUResource]; ok {
		t.Error("a CPU size asks for nvidia.com/gpu")
	}
	if pod.Spec.PriorityClassName != "" {
		t.Errorf("dedicated node pod has priority class %q", pod.Spec.PriorityClassName)
	}
	if g := *pod.Spec.TerminationGracePeriodSeconds; g != 40 {
		t.Errorf("grace %d; want the provider default 40", g)
	}
	if _, ok := secret.Data[secretCAKey]; ok {
		t.Error("secret has a CA though none was given")
	}
	for _, e := range c.Env {
		if e.Name == "CUMULUS_CA_PEM" {
			t.Error("CUMULUS_CA_PEM set without a CA")
		}
	}
}

func podWith(mut func(*Pod)) *Pod {
	pod := &Pod{ObjectMeta: ObjectMeta{Name: "cumulus-n1", Annotations: map[string]string{AnnotationNode: "n1"}},
		Status: PodStatus{Phase: PodPending}}
	mut(pod)
	return pod
}

func TestEventOf(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name    string
		pod     *Pod
		deleted bool
		kind    provider.EventKind
		reason  string // substring
		none    bool
	}{
		{name: "unschedulable", pod: podWith(func(p *Pod) {
			p.Status.Conditions = []PodCondition{{Type: PodScheduled, Status: ConditionFalse, Reason: "Unschedulable",
				Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}
		}), kind: provider.EventPending, reason: "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."},
		{name: "image pull", pod: podWith(func(p *Pod) {
			p.Status.ContainerStatuses = []ContainerStatus{{Name: "agent", State: ContainerState{
				Waiting: &ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}), kind: provider.EventPending, reason: "ImagePullBackOff"},
		{name: "just pending", pod: podWith(func(*Pod) {}), kind: provider.EventPending, reason: ""},
		{name: "running", pod: podWith(func(p *Pod) { p.Status.Phase = PodRunning }), none: true},
		{name: "being deleted", pod: podWith(func(p *Pod) {
			p.Status.Phase, p.DeletionTimestamp = PodRunning, &now
			p.Status.Conditions = []PodCondition{{Type: DisruptionTarget, Status: ConditionTrue,
				Reason: "PreemptionByScheduler", Message: "preempted by a higher-priority pod"}}
		}), kind: provider.EventTerminating, reason: "PreemptionByScheduler"},
		{name: "deleted", pod: podWith(func(p *Pod) { p.Status.Phase = PodRunning }), deleted: true, kind: provider.EventGone, reason: "was deleted"},
		{name: "evicted by kubelet", pod: podWith(func(p *Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = PodFailed, "Evicted", "The node was low on resource: memory."
		}), kind: provider.EventGone, reason: "Evicted: The node was low on resource: memory."},
		{name: "agent crashed", pod: podWith(func(p *Pod) {
			p.Status.Phase = PodFailed
			p.Status.ContainerStatuses = []ContainerStatus{{Name: "agent", State: ContainerState{
				Terminated: &ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}
		}), kind: provider.EventGone, reason: "exited with 2"},
		{name: "not ours", pod: &Pod{}, none: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, ok := eventOf(tc.pod, tc.deleted)
			if tc.none {
				if ok {
					t.Errorf("got event %+v; want none", ev)
				}
				return
			}
			if !ok || ev.Kind != tc.kind || ev.NodeID != "n1" || !strings.Contains(ev.Reason, tc.reason) || (tc.reason == "" && ev.Reason != "") {
				t.Errorf("eventOf = %+v, %v; want kind %s with reason containing %q", ev, ok, tc.kind, tc.reason)
			}
		})
	}
}

func TestPodForJobImageInjectsTheAgent(t *testing.T) {
	p := testProvider()
	pod, _ := p.podFor(provider.NodeSpec{NodeID: "n1", ComputeID: "c", VCPUs: 4, MemoryGB: 14, JoinToken: "j",
		Image: "registry.local/pytorch:2.3"})
	c := pod.Spec.Containers[0]
	if c.Image != "registry.local/pytorch:2.3" || c.Command[0] != InjectedAgent {
		t.Errorf("agent container runs %s %v; want the job image with the injected agent", c.Image, c.Command)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %+v", pod.Spec.InitContainers)
	}
	ic := pod.Spec.InitContainers[0]
	if ic.Image != p.o.Image || strings.Join(ic.Command, " ") != "/usr/local/bin/cumulus node-image install-agent /opt/cumulus/bin" {
		t.Errorf("init container %s %v; want the node image installing the agent", ic.Image, ic.Command)
	}
	shared := func(ms []VolumeMount) bool {
		for _, m := range ms {
			if m.Name == "cumulus-bin" && m.MountPath == "/opt/cumulus/bin" {
				return true
			}
		}
		return false
	}
	if !shared(ic.VolumeMounts) || !shared(c.VolumeMounts) {
		t.Error("the init container and the agent do not share the binary's volume")
	}
	found := false
	for _, e := range c.Env {
		found = found || (e.Name == "CUMULUS_NODE_IMAGE" && e.Value == "registry.local/pytorch:2.3")
	}
	if !found {
		t.Error("the agent is not told which image it runs in")
	}
	plain, _ := p.podFor(provider.NodeSpec{NodeID: "n2", ComputeID: "c", VCPUs: 1, MemoryGB: 1, JoinToken: "j"})
	if len(plain.Spec.InitContainers) != 0 || plain.Spec.Containers[0].Image != p.o.Image {
		t.Error("a node without a job image should run the node image alone")
	}
}
