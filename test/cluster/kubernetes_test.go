package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/kubernetes"
	"github.com/cumulus-ml/cumulus/test/kubelab"
)

// The Kubernetes provider end to end: a real `cumulus serve --provider
// kubernetes` against a real kube-apiserver, scheduler and
// controller-manager (kubelab), with fake nodes and a stand-in
// kubelet that runs each node pod's agent as a real process.

var (
	labOnce sync.Once
	theLab  *kubelab.Lab
	labErr  error
	labDir  string
)

// kubeLab starts the shared lab on first use (TestMain stops it). Without
// the tools a test skips locally and fails in CI.
func kubeLab(t testing.TB) *kubelab.Lab {
	t.Helper()
	labOnce.Do(func() {
		labDir, labErr = os.MkdirTemp("", "cumulus-kubelab-")
		if labErr != nil {
			return
		}
		theLab, labErr = kubelab.Start(context.Background(), labDir)
		if labErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, n := range []kubelab.NodeSpec{
			{Name: "kw-0", CPUs: 32, MemoryGi: 128, PodCIDR: "127.2.1.0/24"},
			{Name: "kw-1", CPUs: 32, MemoryGi: 128, PodCIDR: "127.2.2.0/24"},
			{Name: "kw-2", CPUs: 32, MemoryGi: 128, PodCIDR: "127.2.3.0/24"},
		} {
			if labErr = theLab.AddNode(ctx, n); labErr != nil {
				return
			}
		}
	})
	if errors.Is(labErr, kubelab.ErrNoTools) && os.Getenv("CI") == "" {
		t.Skip(labErr)
	}
	if labErr != nil {
		t.Fatalf("Kubernetes lab: %v", labErr)
	}
	return theLab
}

func stopKubeLab() {
	if theLab != nil {
		theLab.Close()
	}
	if labDir != "" {
		os.RemoveAll(labDir)
	}
}

// kubeServer is a server on the kubernetes provider with its own namespace
// and stand-in kubelet.
type kubeServer struct {
	*server
	lab *kubelab.Lab
	ns  string
}

func startKubeServer(t testing.TB, args ...string) *kubeServer {
	t.Helper()
	lab := kubeLab(t)
	b := make([]byte, 3)
	rand.Read(b)
	ns := "e2e-" + hex.EncodeToString(b)
	ctx := context.Background()
	if err := lab.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	k, err := lab.RunKubelet(ctx, ns, map[string]string{nodeimage.BinaryPath: binary, kubernetes.InjectedAgent: binary}, root)
	if err != nil {
		t.Fatal(err)
	}
	s := startServerTB(t, append([]string{"--provider", "kubernetes", "--kubeconfig", lab.Kubeconfig, "--kube-namespace", ns,
		"--node-image", "cumulus-node:test"}, args...)...)
	t.Cleanup(func() {
		s.stop() // before the kubelet, so no agent outlives the test
		k.Stop()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(root, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), tail(string(b), 1500))
			}
		}
	})
	return &kubeServer{server: s, lab: lab, ns: ns}
}

// createKubeCompute makes a cluster whose node pods tolerate the lab's fake nodes.
func (s *kubeServer) createKubeCompute(name, size, priority string, max int32, idle string) {
	s.t.Helper()
	zero := int32(0)
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.VMSize, a.VMPriority = size, priority
	a.PreemptionGracePeriod = "PT2S"
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}
	t := kubelab.Toleration
	a.Kubernetes = &api.KubernetesPlacement{NodeSelector: map[string]string{"type": "fake"},
		Tolerations: []api.Toleration{{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect)}}}
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

// pods lists the namespace's node pods (not those being deleted).
func (s *kubeServer) pods() []corev1.Pod {
	s.t.Helper()
	l, err := s.lab.Client.CoreV1().Pods(s.ns).List(bctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManagedBy + "=cumulus"})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// A cluster of min 0, max 3 on Kubernetes: jobs arrive, node pods are
// created and scheduled, the jobs run on their agents, and after the idle
// time there are no pods left.
func TestKubernetesClusterScalesPodsUpAndToZero(t *testing.T) {
	s := startKubeServer(t)
	s.createKubeCompute("k8s-cpu", "Standard_DS3_v2", api.PriorityDedicated, 3, "PT3S")
	names := []string{"kj-1", "kj-2", "kj-3", "kj-4"}
	for _, n := range names {
		s.submit(n, "k8s-cpu", `echo "hello from $CUMULUS_JOB_NAME on $CUMULUS_NODE_ID"; sleep 2`)
	}
	maxPods := 0
	scheduled := map[string]string{} // pod → fake node
	waitFor(t, "the jobs to complete", 90*time.Second, func() bool {
		pods := s.pods()
		maxPods = max(maxPods, len(pods))
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				scheduled[p.Name] = p.Spec.NodeName
			}
		}
		for _, n := range names {
			st := s.job(n).Properties.Status
			if api.JobTerminal(st) && st != api.JobCompleted {
				t.Fatalf("job %s ended %s: %s", n, st, s.job(n).Properties.StatusMessage)
			}
			if st != api.JobCompleted {
				return false
			}
		}
		return true
	})
	if maxPods < 2 || maxPods > 3 {
		t.Errorf("saw at most %d node pods at once; want 2 or 3 (max 3, four jobs)", maxPods)
	}
	if len(scheduled) == 0 {
		t.Error("no node pod was ever scheduled onto a node")
	}
	for _, n := range names {
		if log := s.jobLog(n); !strings.Contains(log, "hello from "+n) {
			t.Errorf("log of %s = %q", n, log)
		}
	}
	waitFor(t, "the cluster to scale back to zero pods", 30*time.Second, func() bool {
		comp, err := s.c.GetCompute(bctx, "k8s-cpu")
		if err != nil {
			t.Fatal(err)
		}
		return len(s.pods()) == 0 && comp.Aml().CurrentNodeCount == 0
	})
	secrets, err := s.lab.Client.CoreV1().Secrets(s.ns).List(bctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManagedBy + "=cumulus"})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("node secrets left after scale-down: %d (%v)", len(secrets.Items), err)
	}
}

// A GPU size when no node has a GPU: the cluster shows the scheduler's
// reason at once, and gives the node up at the provisioning timeout.
func TestKubernetesUnschedulableGPUShowsWhy(t *testing.T) {
	s := startKubeServer(t, "--provisioning-timeout", "6s")
	s.createKubeCompute("k8s-gpu", "Standard_NC6s_v3", api.PriorityDedicated, 1, "PT30S")
	s.submit("gpu-job", "k8s-gpu", "nvidia-smi")
	var msgs []string
	errorsOf := func() []string {
		comp, err := s.c.GetCompute(bctx, "k8s-gpu")
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for _, e := range comp.Aml().Errors {
			msgs = append(msgs, e.Error.Code+": "+e.Error.Message)
		}
		return msgs
	}
	has := func(code, substr string) bool {
		for _, m := range errorsOf() {
			if strings.HasPrefix(m, code+":") && strings.Contains(m, substr) {
				return true
			}
		}
		return false
	}
	waitFor(t, "the cluster to show the pod is unschedulable", 30*time.Second, func() bool {
		return has("NodeNotReady", "Insufficient nvidia.com/gpu")
	})
	waitFor(t, "the provisioning timeout to give the node up, with the reason", 30*time.Second, func() bool {
		return has("NodeProvisioningFailed", "Insufficient nvidia.com/gpu") || has("NodeUnusable", "Insufficient nvidia.com/gpu")
	})
	if j := s.job("gpu-job"); api.JobTerminal(j.Properties.Status) {
		t.Errorf("the job ended %s; it should wait for a GPU", j.Properties.Status)
	}
	t.Logf("cluster errors: %q", msgs)
}

// Deleting the pod of a low-priority node is a preemption: the job goes
// back to the queue without using a retry and runs again on a new pod.
func TestKubernetesLowPriorityPodDeletedRequeuesJob(t *testing.T) {
	s := startKubeServer(t)
	s.createKubeCompute("k8s-spot", "Standard_DS3_v2", api.PriorityLowPriority, 1, "PT30S")
	s.submit("spot-job", "k8s-spot", `echo "attempt $CUMULUS_ATTEMPT"; if [ "$CUMULUS_ATTEMPT" = 1 ]; then sleep 120; fi`)
	waitFor(t, "the job to run", 60*time.Second, func() bool { return s.job("spot-job").Properties.Status == api.JobRunning })
	pods := s.pods()
	if len(pods) != 1 {
		t.Fatalf("%d node pods; want 1", len(pods))
	}
	if pods[0].Spec.PriorityClassName != kubernetes.DefaultLowPriorityClass {
		t.Errorf("low-priority node pod has priority class %q", pods[0].Spec.PriorityClassName)
	}
	if err := s.lab.Client.CoreV1().Pods(s.ns).Delete(bctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	j := s.waitJob("spot-job", api.JobCompleted, 90*time.Second)
	a := j.Properties.Attempts
	if len(a) != 2 || !strings.Contains(a[0].Reason, "preempted") {
		t.Fatalf("attempts = %+v; want two, the first preempted", a)
	}
	if !strings.Contains(s.jobLog("spot-job"), "attempt 2") {
		t.Errorf("log of the second attempt = %q", s.jobLog("spot-job"))
	}
}

// A 2-node PyTorch job on pods: MASTER_ADDR is rank 0's pod IP, and the
// ranks rendezvous there over TCP.
func TestKubernetesRanksRendezvousOverPodIPs(t *testing.T) {
	bin := buildRendezvous(t)
	s := startKubeServer(t)
	s.createKubeCompute("k8s-dist", "Standard_DS3_v2", api.PriorityDedicated, 2, "PT30S")
	s.submitJob(distributedJob("k8s-torch", "k8s-dist", `echo "master=$MASTER_ADDR"; `+bin, 2, "PyTorch", 1))
	j := s.waitJob("k8s-torch", api.JobCompleted, 90*time.Second)
	if got := s.rankLog("k8s-torch", 0); !strings.Contains(got, "rank 0 of 2: sum=1") {
		t.Fatalf("rank 0 log = %q", got)
	}
	rank0 := j.Properties.Attempts[0].Nodes[0]
	pod, err := s.lab.Client.CoreV1().Pods(s.ns).Get(bctx, kubernetes.PodName(rank0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("master=%s", pod.Status.PodIP); !strings.Contains(s.rankLog("k8s-torch", 1), want) {
		t.Errorf("rank 1 log = %q; want %s (rank 0's pod IP)", s.rankLog("k8s-torch", 1), want)
	}
}

// A job whose environment names an image gets a node pod of that image,
// the agent injected by an init container from the node image; a job
// without one runs on a node-image pod. (the lab runs no containers: the
// stand-in kubelet runs the injected agent as a process here.)
func TestKubernetesJobImageBecomesThePodImage(t *testing.T) {
	s := startKubeServer(t)
	s.createKubeCompute("k8s-img", "Standard_DS3_v2", api.PriorityDedicated, 2, "PT30S")
	s.createEnvironment("torch", "1", "registry.example/pytorch:2.3")
	s.submitJob(imageJob("in-image", "k8s-img", "azureml:torch:1", `echo "image job on $CUMULUS_NODE_ID"`))
	s.submit("plain", "k8s-img", `echo "plain job on $CUMULUS_NODE_ID"`)
	image := s.waitJob("in-image", api.JobCompleted, 60*time.Second)
	plain := s.waitJob("plain", api.JobCompleted, 60*time.Second)
	podOf := func(j api.Job) *corev1.Pod {
		pod, err := s.lab.Client.CoreV1().Pods(s.ns).Get(bctx, kubernetes.PodName(j.Properties.Attempts[0].Nodes[0]), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	ip, pp := podOf(image), podOf(plain)
	if c := ip.Spec.Containers[0]; c.Image != "registry.example/pytorch:2.3" || c.Command[0] != kubernetes.InjectedAgent {
		t.Errorf("the image job's pod runs %s %v; want the job's image with the injected agent", c.Image, c.Command)
	}
	if len(ip.Spec.InitContainers) != 1 || ip.Spec.InitContainers[0].Image != "cumulus-node:test" {
		t.Errorf("the image job's pod has init containers %+v; want one from the node image", ip.Spec.InitContainers)
	}
	if c := pp.Spec.Containers[0]; c.Image != "cumulus-node:test" || len(pp.Spec.InitContainers) != 0 {
		t.Errorf("the plain job's pod runs %s with %d init containers; want the node image alone", c.Image, len(pp.Spec.InitContainers))
	}
	if log := s.jobLog("in-image"); !strings.Contains(log, "running in image registry.example/pytorch:2.3") {
		t.Errorf("log of the image job = %q; want the agent to say it runs in the image", log)
	}
}

// BenchmarkKubernetesScaleFromZero: a job submitted to an empty cluster on
// the kubernetes provider; Queued→Running includes creating the secret and
// pod, the scheduler binding it, the lab's kubelet marking it Running, the agent process
// starting and registering, and the job starting. (the lab starts no
// container, so image pulls and container start-up are not in the figure.)
//
//	go test ./test/cluster/ -run '^$' -bench KubernetesScaleFromZero -benchtime 20x
func BenchmarkKubernetesScaleFromZero(b *testing.B) {
	s := startKubeServer(b, "--log-level", "warn")
	s.createKubeCompute("kcold", "Standard_DS3_v2", api.PriorityDedicated, 1, "PT0S")
	benchFromZero(b, s.server, "kcold", func() bool { return len(s.pods()) == 0 })
}

// BenchmarkKubernetesBurst: 30 jobs submitted at once to an empty cluster
// of max 30 on the kubernetes provider; each job's Queued→Running, and the
// time until the last one runs ("all-ms"). 30 node pods are created,
// scheduled onto the lab's fake nodes and their agents started.
//
//	go test ./test/cluster/ -run '^$' -bench KubernetesBurst -benchtime 3x
func BenchmarkKubernetesBurst(b *testing.B) {
	s := startKubeServer(b, "--log-level", "warn")
	s.createKubeCompute("kburst", "Standard_DS2_v2", api.PriorityDedicated, 30, "PT0S")
	benchBurst(b, s.server, "kburst", 30, 120*time.Second, func() bool { return len(s.pods()) == 0 })
}

// After a control-plane crash: a node pod deleted while the server was down
// is replaced (its record becomes unusable, its job is requeued and
// completes), and a pod of this control plane without a node record is
// deleted.
func TestKubernetesRestartReconcilesPods(t *testing.T) {
	s := startKubeServer(t)
	s.createKubeCompute("k8s-rst", "Standard_DS3_v2", api.PriorityDedicated, 1, "PT30S")
	s.submit("long", "k8s-rst", `if [ "$CUMULUS_ATTEMPT" = 1 ]; then sleep 300; fi; echo "attempt $CUMULUS_ATTEMPT done"`)
	waitFor(t, "the job to run", 60*time.Second, func() bool { return s.job("long").Properties.Status == api.JobRunning })
	lost := s.pods()
	if len(lost) != 1 {
		t.Fatalf("%d pods; want 1", len(lost))
	}
	s.kill9()

	// While it is down: the node's pod goes, and an orphan pod of this
	// control plane (same owner: its data dir) appears.
	if err := s.lab.Client.CoreV1().Pods(s.ns).Delete(bctx, lost[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, _ := filepath.Abs(s.dataDir)
	cfg, _, err := kubernetes.LoadConfig(s.lab.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kubernetes.New(bctx, kubernetes.Options{Config: cfg, Namespace: s.ns, Image: "cumulus-node:test", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, err := p.Create(bctx, provider.NodeSpec{NodeID: "orphan-1", ComputeID: "x", VCPUs: 1, MemoryGB: 1, ServerURL: "http://" + s.addr, JoinToken: "nope"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan pod to be seen and the lost pod to go", 30*time.Second, func() bool {
		names := map[string]bool{}
		for _, p := range s.pods() {
			names[p.Name] = true
		}
		return names[kubernetes.PodName("orphan-1")] && !names[lost[0].Name]
	})

	s.start()
	waitFor(t, "the orphan pod deleted", 30*time.Second, func() bool {
		for _, p := range s.pods() {
			if p.Name == kubernetes.PodName("orphan-1") {
				return false
			}
		}
		return true
	})
	j := s.waitJob("long", api.JobCompleted, 90*time.Second)
	if a := j.Properties.Attempts; len(a) != 2 || a[1].Nodes[0] == a[0].Nodes[0] {
		t.Fatalf("attempts %+v; want a second attempt on a new node", a)
	}
}
