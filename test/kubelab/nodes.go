package kubelab

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node side of a kubelet that the lab plays for its fake nodes: a Ready
// status when a node is added, a lease renewed while the lab runs (the node
// lifecycle controller's heartbeat), and an address for each pod scheduled
// there from the node's pod CIDR.

// leaseEvery is how often node leases are renewed; leaseFor how long one
// holds (the controller-manager's grace period is longer).
const (
	leaseEvery = 10 * time.Second
	leaseFor   = 40
)

// fakeNodes holds the lab's nodes and the pod addresses given out on each.
type fakeNodes struct {
	mu    sync.Mutex
	nodes map[string]*fakeNode
}

type fakeNode struct {
	prefix netip.Prefix
	next   netip.Addr
	byPod  map[string]string // pod UID → IP
}

// markReady gives a new node the status a kubelet reports on its first
// heartbeat, and takes its lease. The node lifecycle controller writes the
// node at the same time (taints), so a conflict is read again and retried.
func (l *Lab) markReady(ctx context.Context, name string) error {
	var err error
	for range 20 {
		var cur *corev1.Node
		if cur, err = l.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		readyStatus(cur)
		if _, err = l.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
			return l.renewLease(ctx, name)
		}
		if !apierrors.IsConflict(err) {
			break
		}
	}
	return fmt.Errorf("node %s status: %w", name, err)
}

// readyStatus is a live node's status.
func readyStatus(n *corev1.Node) {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n.Status.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated"),
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux",
		KubeletVersion: "kubelab", ContainerRuntimeVersion: "kubelab", KernelVersion: "kubelab"}
	n.Status.Phase = corev1.NodeRunning
}

// renewLease creates or renews a node's lease in kube-node-lease.
func (l *Lab) renewLease(ctx context.Context, name string) error {
	leases := l.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	holder, dur := name, int32(leaseFor)
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now}}, metav1.CreateOptions{})
	} else if err == nil {
		cur.Spec.RenewTime = &now
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("lease of node %s: %w", name, err)
	}
	return nil
}

// heartbeat renews every node's lease until ctx ends.
func (l *Lab) heartbeat(ctx context.Context) {
	t := time.NewTicker(leaseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.fake.mu.Lock()
		names := make([]string, 0, len(l.fake.nodes))
		for n := range l.fake.nodes {
			names = append(names, n)
		}
		l.fake.mu.Unlock()
		for _, n := range names {
			if err := l.renewLease(ctx, n); err != nil && ctx.Err() == nil {
				fmt.Printf("kubelab: %v\n", err)
			}
		}
	}
}

// addFake records a node and its pod CIDR.
func (l *Lab) addFake(name, cidr string) error {
	fn := &fakeNode{byPod: map[string]string{}}
	if cidr != "" {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("node %s pod CIDR: %w", name, err)
		}
		fn.prefix, fn.next = p.Masked(), p.Masked().Addr().Next()
	}
	l.fake.mu.Lock()
	defer l.fake.mu.Unlock()
	if l.fake.nodes == nil {
		l.fake.nodes = map[string]*fakeNode{}
	}
	l.fake.nodes[name] = fn
	return nil
}

// podIP gives a pod on node its address (the same one every time).
func (l *Lab) podIP(node, podUID string) (string, error) {
	l.fake.mu.Lock()
	defer l.fake.mu.Unlock()
	fn := l.fake.nodes[node]
	if fn == nil || !fn.prefix.IsValid() {
		return "", fmt.Errorf("node %s has no pod CIDR in this lab", node)
	}
	if ip, ok := fn.byPod[podUID]; ok {
		return ip, nil
	}
	if !fn.prefix.Contains(fn.next) {
		return "", fmt.Errorf("node %s: pod CIDR %s is used up", node, fn.prefix)
	}
	ip := fn.next.String()
	fn.byPod[podUID], fn.next = ip, fn.next.Next()
	return ip, nil
}

// markRunning reports a scheduled pod Running with its address, as a
// kubelet does once its containers started; the lab's Kubelet then starts
// the pod's process.
func (k *Kubelet) markRunning(ctx context.Context, pod *corev1.Pod) {
	ip, err := k.lab.podIP(pod.Spec.NodeName, string(pod.UID))
	if err != nil {
		k.reportEnd(ctx, pod, 128, "NetworkNotReady", err.Error())
		return
	}
	for i := 0; i < 10 && ctx.Err() == nil; i++ {
		cur, err := k.lab.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil || cur.Status.Phase != corev1.PodPending {
			return
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.HostIP, cur.Status.PodIP = "127.0.0.1", ip
		cur.Status.HostIPs, cur.Status.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: ip}}
		cur.Status.StartTime = &now
		cur.Status.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		cur.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		_, err = k.lab.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}
