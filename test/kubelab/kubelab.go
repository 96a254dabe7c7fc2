// Package kubelab runs a real Kubernetes control plane on this machine for
// the Kubernetes provider's tests: kube-apiserver (with embedded etcd),
// kube-scheduler and kube-controller-manager from the kubetest tool
// (test/kube), with fake nodes whose kubelet the lab plays: it reports
// them Ready and renews their leases, and its Kubelet gives each pod
// scheduled there an address, reports it Running and starts the real
// `cumulus agent` process with the pod's environment (no container
// runtime), sends
// it SIGTERM when the pod is deleted (then removes the pod after the grace
// period, as a kubelet does), and marks the pod failed when the process
// dies. Everything but the container runtime is real.
package kubelab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Where the tools are: built by scripts/kube-tools.sh.
const (
	EnvTools = "CUMULUS_KUBE_TOOLS" // folder with kubetest
)

// ToolsDir is the folder holding kubetest.
func ToolsDir() string {
	if d := os.Getenv(EnvTools); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "cumulus", "kube-tools")
}

// ErrNoTools is returned when the tools are not built.
var ErrNoTools = errors.New("Kubernetes test tools not built (run scripts/kube-tools.sh)")

// BuildWait bounds how long Start waits for a build of the tools under way.
var BuildWait = 25 * time.Minute

// waitForBuild waits while scripts/kube-tools.sh builds the tools into dir:
// it holds an exclusive flock on build.lock there for the whole build, and
// scripts/test.sh runs it in the background from its start, so that only
// the tests that need the tools wait for them. No lock file: no build was
// ever started here.
func waitForBuild(ctx context.Context, dir string) error {
	f, err := os.Open(filepath.Join(dir, "build.lock"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(BuildWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("wait for the Kubernetes test tools' build: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Kubernetes test tools were still building after %s; see %s", BuildWait, filepath.Join(dir, "build.log"))
		}
		select { // the build takes minutes
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Lab is a running control plane and the fake nodes added to it.
type Lab struct {
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Client     k8s.Interface

	procs    []*exec.Cmd
	fake     fakeNodes
	stopBeat context.CancelFunc
}

// Start brings up the control plane in dir; Close stops it. It first
// waits for a build of the tools under way (up to BuildWait), then for the
// control plane to be ready (up to 3 minutes); ctx cancels either wait.
// Give it a context without a deadline of its own: a deadline set before
// the call would count the build's wait, which on a fresh machine can
// take most of it.
func Start(ctx context.Context, dir string) (*Lab, error) {
	tools := ToolsDir()
	if err := waitForBuild(ctx, tools); err != nil {
		return nil, err
	}
	kubetest := filepath.Join(tools, "kubetest")
	if _, err := os.Stat(kubetest); err != nil {
		if log := filepath.Join(tools, "build.log"); fileExists(log) {
			return nil, fmt.Errorf("%w: %s missing; the last build's log is %s", ErrNoTools, kubetest, log)
		}
		return nil, fmt.Errorf("%w: %s missing", ErrNoTools, kubetest)
	}
	l := &Lab{Dir: dir}
	up := exec.Command(kubetest, "up", "--dir", filepath.Join(dir, "control-plane"))
	logf, err := os.Create(filepath.Join(dir, "control-plane.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	up.Stderr = logf
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := up.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := up.Start(); err != nil {
		return nil, err
	}
	l.procs = append(l.procs, up)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ready" {
				ready <- f[2]
			}
		}
		close(ready)
	}()
	select {
	case kc, ok := <-ready:
		if !ok {
			l.Close()
			return nil, fmt.Errorf("kubetest up exited before it was ready; the end of its log (%s):\n%s", logf.Name(), logTail(logf.Name()))
		}
		l.Kubeconfig = kc
	case <-time.After(3 * time.Minute):
		l.Close()
		return nil, fmt.Errorf("kubetest up not ready after 3 minutes; the end of its log (%s):\n%s", logf.Name(), logTail(logf.Name()))
	case <-ctx.Done():
		l.Close()
		return nil, ctx.Err()
	}
	if l.Config, err = clientcmd.BuildConfigFromFlags("", l.Kubeconfig); err != nil {
		l.Close()
		return nil, err
	}
	l.Config.QPS, l.Config.Burst = 200, 400 // a kubelet per node would not share one client's default 5/s
	if l.Client, err = k8s.NewForConfig(l.Config); err != nil {
		l.Close()
		return nil, err
	}

	hctx, stop := context.WithCancel(context.Background())
	l.stopBeat = stop
	go l.heartbeat(hctx)
	return l, nil
}

// logTail is the last lines of a log, for an error: the test's folder
// that holds the log is removed when the test ends.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Close stops the nodes' heartbeat and the control plane.
func (l *Lab) Close() {
	if l.stopBeat != nil {
		l.stopBeat()
	}
	for i := len(l.procs) - 1; i >= 0; i-- {
		p := l.procs[i]
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	l.procs = nil
}

// NodeSpec is a fake node's capacity.
type NodeSpec struct {
	Name     string
	CPUs     int
	MemoryGi int
	GPUs     int
	Labels   map[string]string
	PodCIDR  string // pods on it get IPs from here; use 127.x.y.0/24 so they are reachable
}

// AddNode registers a fake node, reports it Ready, and waits until the
// node lifecycle controller agrees. It carries the label type=fake and
// the taint kubelab/node=fake:NoSchedule: pods must tolerate it
// (Toleration).
func (l *Lab) AddNode(ctx context.Context, n NodeSpec) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(n.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(n.MemoryGi)<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	if n.GPUs > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
	}
	labels := map[string]string{"kubernetes.io/hostname": n.Name, "type": "fake"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{PodCIDR: n.PodCIDR, PodCIDRs: nonEmpty(n.PodCIDR),
			Taints: []corev1.Taint{{Key: fakeTaint, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := l.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	if err := l.addFake(n.Name, n.PodCIDR); err != nil {
		return err
	}
	if err := l.markReady(ctx, n.Name); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cur, err := l.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && ready(cur) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready and untainted after a minute (see %s)", n.Name,
		filepath.Join(l.Dir, "control-plane.log"))
}

// ready: the node is reported Ready and the node lifecycle controller has
// lifted the not-ready taint, so pods can be scheduled there.
func ready(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// fakeTaint keeps pods off the lab's nodes unless they tolerate it.
const fakeTaint = "kubelab/node"

// Toleration lets a pod run on the lab's fake nodes.
var Toleration = corev1.Toleration{Key: fakeTaint, Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// CreateNamespace makes a namespace for one test.
func (l *Lab) CreateNamespace(ctx context.Context, name string) error {
	_, err := l.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}
