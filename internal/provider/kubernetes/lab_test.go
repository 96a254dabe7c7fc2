package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
	"github.com/cumulus-ml/cumulus/test/kubelab"

	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// These tests run against a real API server and scheduler (kubelab); the
// stand-in kubelet runs each node pod's agent as a process of a freshly
// built cumulus.

var (
	lab       *kubelab.Lab
	agentBin  string
	labReason string // why the lab tests skip ("" when they run)
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

// labConfig is the lab's API server as the provider reads it: from the
// lab's kubeconfig, through LoadConfig.
func labConfig(t *testing.T) *Config {
	t.Helper()
	cfg, _, err := LoadConfig(lab.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "cumulus-kube-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	lab, err = kubelab.Start(context.Background(), tmp)
	if errors.Is(err, kubelab.ErrNoTools) && os.Getenv("CI") == "" {
		labReason = err.Error()
		fmt.Fprintln(os.Stderr, "skipping the Kubernetes lab tests:", labReason)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: Kubernetes lab:", err)
		return 1
	}
	defer lab.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, n := range []kubelab.NodeSpec{
		{Name: "kw-cpu-0", CPUs: 32, MemoryGi: 128, PodCIDR: "127.1.1.0/24"},
		{Name: "kw-cpu-1", CPUs: 32, MemoryGi: 128, PodCIDR: "127.1.2.0/24"},
	} {
		if err := lab.AddNode(ctx, n); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: node", i, err)
			return 1
		}
	}
	agentBin, _, err = testbin.Cumulus(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// env is one test's namespace, kubelet and provider options.
type env struct {
	ns      string
	kubelet *kubelab.Kubelet
	srv     *providertest.StubServer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if labReason != "" {
		t.Skip(labReason)
	}
	b := make([]byte, 3)
	rand.Read(b)
	e := &env{ns: "t-" + hex.EncodeToString(b), srv: providertest.NewStubServer(t)}
	ctx := context.Background()
	if err := lab.CreateNamespace(ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k, err := lab.RunKubelet(ctx, e.ns, map[string]string{nodeimage.BinaryPath: agentBin}, dir)
	if err != nil {
		t.Fatal(err)
	}
	e.kubelet = k
	t.Cleanup(func() {
		k.Stop()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), tail(b, 2000))
			}
		}
	})
	return e
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (e *env) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(context.Background(), Options{Config: labConfig(t), Namespace: e.ns, Image: "cumulus-node:test", Owner: "test-" + e.ns,
		StopGrace: 5 * time.Second, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var fakeNodes = &api.KubernetesPlacement{Tolerations: []api.Toleration{{Key: kubelab.Toleration.Key, Operator: "Equal",
	Value: kubelab.Toleration.Value, Effect: string(kubelab.Toleration.Effect)}}}

func (e *env) spec(id string) provider.NodeSpec {
	return provider.NodeSpec{NodeID: id, ComputeID: "/subscriptions/s/computes/c1", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14,
		ServerURL: e.srv.URL, JoinToken: "join-" + id, Kubernetes: fakeNodes}
}

func TestConformance(t *testing.T) {
	e := newEnv(t)
	providertest.Run(t, func(t *testing.T) provider.Provider { return e.provider(t) }, e.spec)
}

// events collects a provider's events.
type events struct {
	mu  sync.Mutex
	all []provider.Event
}

func watch(t *testing.T, p *Provider) *events {
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Watch(ctx, func(e provider.Event) {
			ev.mu.Lock()
			ev.all = append(ev.all, e)
			ev.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ev
}

// wait waits for an event of the node of that kind whose reason holds substr.
func (ev *events) wait(t *testing.T, node string, kind provider.EventKind, substr string) provider.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ev.mu.Lock()
		for _, e := range ev.all {
			if e.NodeID == node && e.Kind == kind && strings.Contains(e.Reason, substr) {
				ev.mu.Unlock()
				return e
			}
		}
		ev.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	t.Fatalf("no %s event for %s with %q within 30s; events: %+v", kind, node, substr, ev.all)
	return provider.Event{}
}

func TestAgentRegistersWithTokenFromSecret(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ctx := context.Background()
	id := "kt-secret"
	if _, err := p.Create(ctx, e.spec(id)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	deadline := time.Now().Add(30 * time.Second)
	for e.srv.JoinToken(id) == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.srv.JoinToken(id); got != "join-"+id {
		t.Fatalf("the agent registered with token %q; want the node's join token from its secret", got)
	}
	pod, err := lab.Client.CoreV1().Pods(e.ns).Get(ctx, PodName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := lab.Client.CoreV1().Secrets(e.ns).Get(ctx, PodName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != pod.UID {
		t.Errorf("the secret's owners %+v; want the node pod %s, so it goes with the pod", sec.OwnerReferences, pod.UID)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.CoreV1().Secrets(e.ns).Get(ctx, PodName(id), metav1.GetOptions{}); err == nil {
		t.Error("the node's secret is still there after Delete")
	}
}

func TestUnschedulableGPUPodReportsWhy(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ev := watch(t, p)
	spec := e.spec("kt-gpu")
	spec.VMSize, spec.VCPUs, spec.MemoryGB, spec.GPUs = "Standard_NC6s_v3", 6, 112, 1
	if _, err := p.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.NodeID) })
	got := ev.wait(t, spec.NodeID, provider.EventPending, "Insufficient nvidia.com/gpu")
	if !strings.Contains(got.Reason, "Unschedulable") {
		t.Errorf("reason %q does not say the pod is unschedulable", got.Reason)
	}
	ins, _ := p.List(context.Background())
	for _, in := range ins {
		if in.NodeID == spec.NodeID && (in.Running || !in.Starting) {
			t.Errorf("an unschedulable pod lists as %+v; want Starting, not Running", in)
		}
	}
}

func TestPodDeletedFromOutsideIsReported(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ev := watch(t, p)
	ctx := context.Background()
	id := "kt-outside"
	if _, err := p.Create(ctx, e.spec(id)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	for deadline := time.Now().Add(30 * time.Second); e.srv.JoinToken(id) == "" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := lab.Client.CoreV1().Pods(e.ns).Delete(ctx, PodName(id), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, id, provider.EventTerminating, "is being deleted")
	ev.wait(t, id, provider.EventGone, "was deleted")
}

func TestAgentExitFailsThePod(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ev := watch(t, p)
	spec := e.spec("kt-crash")
	spec.ServerURL = "ftp://nowhere" // the agent refuses to start: exits 1
	if _, err := p.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.NodeID) })
	ev.wait(t, spec.NodeID, provider.EventGone, "exited with 1")
}

func TestListAfterRestartSeesOnlyItsOwnPods(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.provider(t)
	if _, err := first.Create(ctx, e.spec("kt-mine")); err != nil {
		t.Fatal(err)
	}
	first.Close()
	// A new provider (a restarted control plane) finds the pod; another
	// owner in the same namespace does not.
	again := e.provider(t)
	t.Cleanup(func() { again.Delete(context.Background(), "kt-mine") })
	ins, err := again.List(ctx)
	if err != nil || len(ins) != 1 || ins[0].NodeID != "kt-mine" {
		t.Errorf("after a restart List = %+v, %v; want the one node pod", ins, err)
	}
	other, err := New(ctx, Options{Config: labConfig(t), Namespace: e.ns, Owner: "someone else"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ins, _ := other.List(ctx); len(ins) != 0 {
		t.Errorf("another owner lists %+v", ins)
	}
}

// TestRefusalsAreTyped: the API server's refusals come back as the kinds
// the controller acts on — a namespace's resource quota spent is a want of
// capacity, a pod the API server finds invalid (its placement) a
// configuration error in the API server's words — and no secret is left
// behind.
func TestRefusalsAreTyped(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ctx := context.Background()
	quotas := lab.Client.CoreV1().ResourceQuotas(e.ns)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	made, err := quotas.Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The quota admits nothing until its usage is counted; the lab runs no
	// quota controller, so the test counts it: no pods, none used.
	made.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if _, err := quotas.UpdateStatus(ctx, made, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's quota admission reads quotas from its own cache:
	// wait until it refuses a pod (a dry run, which admission sees but
	// nothing stores), or the provider's Create may come before it knows.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "quota-probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := lab.Client.CoreV1().Pods(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "exceeded quota") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server still admits pods 30 s after a quota of none (last: %v)", err)
		}
	}
	_, err = p.Create(ctx, e.spec("kt-quota"))
	if !provider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("Create beyond the namespace's pod quota = %v; want an insufficient-capacity error saying the quota is exceeded", err)
	}
	if err := quotas.Delete(ctx, q.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	spec := e.spec("kt-invalid")
	spec.Kubernetes = &api.KubernetesPlacement{NodeSelector: map[string]string{"pool": "not a label value"}, Tolerations: fakeNodes.Tolerations}
	_, err = p.Create(ctx, spec)
	if !provider.IsConfiguration(err) || !strings.Contains(err.Error(), "not a label value") {
		t.Errorf("Create of a pod with an invalid node selector = %v; want a configuration error in the API server's words", err)
	}
	for _, id := range []string{"kt-quota", "kt-invalid"} {
		if _, err := lab.Client.CoreV1().Secrets(e.ns).Get(ctx, PodName(id), metav1.GetOptions{}); err == nil {
			t.Errorf("node %s's secret is left behind after a refused Create", id)
		}
	}
}
