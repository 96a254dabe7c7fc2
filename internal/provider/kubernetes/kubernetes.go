// Package kubernetes is the provider whose nodes are pods on an existing
// Kubernetes cluster, each running `cumulus agent` from the node image with
// the VM size's CPU, memory and nvidia.com/gpu as requests and limits. The
// cluster's own autoscaler (cluster-autoscaler, Karpenter) adds machines
// under the pods. The provider watches its pods through an informer and
// reports what it sees (unschedulable, deleted from outside, failed) as
// provider events; it acts, it never decides. It speaks to the API server
// with a client of its own (apiclient.go), not Kubernetes' Go client.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// DefaultLowPriorityClass is the PriorityClass of low-priority node pods;
// the provider creates it (value -100, never preempting) when missing.
const DefaultLowPriorityClass = "cumulus-low-priority"

// Options configure the provider.
type Options struct {
	Config    *Config // the API server (see LoadConfig)
	Namespace string  // where node pods live
	// Image is the node image: it must hold the cumulus binary at
	// nodeimage.BinaryPath (`cumulus node-image build`, pushed to a
	// registry the cluster pulls from).
	Image      string
	PullPolicy string // default IfNotPresent
	// Owner tells this control plane's pods from others' in the same
	// namespace; List and so Reconcile see only these.
	Owner string
	// CAPEM is the control plane's CA, handed to agents through the
	// node's secret (self-signed TLS); nil for plain HTTP or public roots.
	CAPEM []byte
	// StopGrace is the pods' termination grace period when a node spec
	// gives none. Default 40 s.
	StopGrace        time.Duration
	LowPriorityClass string // default DefaultLowPriorityClass
	Log              *slog.Logger
}

// Provider runs nodes as pods.
type Provider struct {
	o          Options
	api        *apiClient
	ownerLabel string
	pods       *podCache // this owner's pods, as the watch shows them
	stop       context.CancelFunc

	mu        sync.Mutex
	classDone bool                      // the low-priority class exists
	last      map[string]provider.Event // last event reported per node (dedupe)
	// netMu: a subnet's NetworkPolicies are not released while a node of
	// it is made (network.go).
	netMu sync.Mutex
}

var (
	_ provider.Provider   = (*Provider)(nil)
	_ provider.Watcher    = (*Provider)(nil)
	_ provider.ImageBound = (*Provider)(nil)
)

// New connects to the API server and starts watching this owner's pods;
// it returns once the pod cache is synced. Close stops the watch.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.Config == nil {
		return nil, errors.New("kubernetes provider: no API server config")
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Image == "" {
		o.Image = nodeimage.DefaultTag
	}
	if o.PullPolicy == "" {
		o.PullPolicy = "IfNotPresent"
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 40 * time.Second
	}
	if o.LowPriorityClass == "" {
		o.LowPriorityClass = DefaultLowPriorityClass
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	client, err := newAPIClient(o.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider: %w", err)
	}
	p := &Provider{o: o, api: client, ownerLabel: labelValue(shortHash(o.Owner) + shortHash("owner:"+o.Owner)),
		last: map[string]provider.Event{}}
	sel := selector(map[string]string{LabelManagedBy: managedBy, LabelOwner: p.ownerLabel})
	p.pods = newPodCache(client, o.Namespace, sel, o.Log)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = cancel
	go p.pods.run(runCtx)
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !p.pods.waitSynced(syncCtx) {
		cancel()
		return nil, fmt.Errorf("kubernetes provider: could not list pods in namespace %s of %s within a minute (is the API server reachable, and may this identity list pods there?)",
			o.Namespace, o.Config.Host)
	}
	return p, nil
}

// Close stops watching pods.
func (p *Provider) Close() error {
	p.stop()
	return nil
}

// ImageBound is true: a node made for a job that names an image is a pod
// of that image (the agent injected), and runs only jobs of that image.
func (p *Provider) ImageBound() bool { return true }

// Name is "kubernetes".
func (p *Provider) Name() string { return "kubernetes" }

// Timeouts of API calls and of waits on pods.
const (
	callTimeout = 30 * time.Second
	waitMargin  = 30 * time.Second // beyond a pod's grace period, for the kubelet to report
)

// Paths of the collections the provider uses.
func (p *Provider) podsPath() string {
	return "/api/v1/namespaces/" + url.PathEscape(p.o.Namespace) + "/pods"
}

func (p *Provider) secretsPath() string {
	return "/api/v1/namespaces/" + url.PathEscape(p.o.Namespace) + "/secrets"
}

const priorityClassesPath = "/apis/scheduling.k8s.io/v1/priorityclasses"

// selector is a label selector of exact values ("a=b,c=d", sorted).
func selector(set map[string]string) string {
	parts := make([]string, 0, len(set))
	for k, v := range set {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Create makes the node's secret and pod. A pod of that node that is
// still terminating is waited out first.
func (p *Provider) Create(ctx context.Context, spec provider.NodeSpec) (string, error) {
	if !provider.ValidNodeID(spec.NodeID) {
		return "", fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", spec.NodeID)
	}
	if spec.LowPriority {
		if err := p.ensureLowPriorityClass(ctx); err != nil {
			return "", err
		}
	}
	pod, secret := p.podFor(spec)

	// The watch cache answers whether the pod exists; a pod it has not
	// seen yet makes the create below fail with AlreadyExists, handled there.
	if cur, ok := p.pods.get(pod.Name); ok {
		if cur.DeletionTimestamp == nil {
			return cur.UID, nil // created before: Create is idempotent
		}
		if err := p.waitGone(ctx, pod.Name, graceOf(cur)+waitMargin); err != nil {
			return "", err
		}
	}

	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if subnetHex(spec) != "" {
		// The subnet's policies exist before its pod, and are not
		// released (releasePolicies) until the pod is made.
		p.netMu.Lock()
		defer p.netMu.Unlock()
		if err := p.ensurePolicies(cctx, spec); err != nil {
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
	}
	secretPath := p.secretsPath() + "/" + url.PathEscape(secret.Name)
	if err := p.api.do(cctx, "POST", p.secretsPath(), "", secret, nil); isAlreadyExists(err) {
		if err := p.api.do(cctx, "PUT", secretPath, "", secret, nil); err != nil {
			return "", fmt.Errorf("update secret %s: %w", secret.Name, typed(err))
		}
	} else if err != nil {
		return "", fmt.Errorf("create secret %s: %w", secret.Name, typed(err))
	}
	made := &Pod{}
	err := p.api.do(cctx, "POST", p.podsPath(), "", pod, made)
	if isAlreadyExists(err) {
		made = &Pod{}
		err = p.api.do(cctx, "GET", p.podsPath()+"/"+url.PathEscape(pod.Name), "", nil, made)
		if err == nil && made.DeletionTimestamp != nil {
			err = fmt.Errorf("an earlier pod of this node is still terminating")
		}
	}
	if err != nil {
		_ = p.api.do(cctx, "DELETE", secretPath, "", nil, nil)
		return "", fmt.Errorf("create pod %s: %w", pod.Name, typed(err))
	}
	// The pod owns its secret: Kubernetes' garbage collector removes the
	// secret with the pod even if this control plane never gets to.
	owner := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q}]}}`, made.Name, made.UID)
	if err := p.api.do(cctx, "PATCH", secretPath, "application/merge-patch+json", []byte(owner), nil); err != nil {
		p.o.Log.Warn("could not make the node pod own its secret", "secret", secret.Name, "err", err)
	}
	p.o.Log.Info("node pod created", "node", spec.NodeID, "pod", made.Name, "namespace", p.o.Namespace, "uid", made.UID)
	return made.UID, nil
}

// ensureLowPriorityClass creates the low-priority PriorityClass once.
func (p *Provider) ensureLowPriorityClass(ctx context.Context) error {
	p.mu.Lock()
	done := p.classDone
	p.mu.Unlock()
	if done {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := p.api.do(ctx, "GET", priorityClassesPath+"/"+url.PathEscape(p.o.LowPriorityClass), "", nil, nil)
	if isNotFound(err) {
		err = p.api.do(ctx, "POST", priorityClassesPath, "", &PriorityClass{
			APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass",
			ObjectMeta:       ObjectMeta{Name: p.o.LowPriorityClass, Labels: map[string]string{LabelManagedBy: managedBy}},
			Value:            -100,
			PreemptionPolicy: "Never",
			Description:      "Cumulus low-priority cluster nodes: preempted first, never preempt others.",
		}, nil)
		if isAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("PriorityClass %s for low-priority nodes (create it, or let this identity create priorityclasses): %w",
			p.o.LowPriorityClass, typed(err))
	}
	p.mu.Lock()
	p.classDone = true
	p.mu.Unlock()
	return nil
}

// Delete deletes the node's pod (its agent gets SIGTERM and the grace
// period) and secret, and returns once the pod no longer counts in List.
func (p *Provider) Delete(ctx context.Context, nodeID string) error {
	name := PodName(nodeID)
	hex := ""
	if cur, ok := p.pods.get(name); ok {
		hex = cur.Labels[LabelSubnet]
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	background := map[string]string{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
	err := p.api.do(cctx, "DELETE", p.podsPath()+"/"+url.PathEscape(name), "", background, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	err = p.api.do(cctx, "DELETE", p.secretsPath()+"/"+url.PathEscape(name), "", nil, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	if err := p.waitLeftList(ctx, name); err != nil {
		return err
	}
	if hex != "" {
		p.releasePolicies(ctx, hex)
	}
	return nil
}

// waitGone waits until the API server no longer has the pod.
func (p *Provider) waitGone(ctx context.Context, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := p.api.do(ctx, "GET", p.podsPath()+"/"+url.PathEscape(name), "", nil, nil)
		if isNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s is still terminating after %s: %w", name, limit, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitLeftList waits until the watch cache shows the pod deleted or being
// deleted, so that List agrees with a Delete that just returned.
func (p *Provider) waitLeftList(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for {
		pod, ok := p.pods.get(name)
		if !ok || pod.DeletionTimestamp != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s: the watch did not show its deletion within %s: %w", name, callTimeout, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// List reports this owner's node pods from the watch cache. Pods being
// deleted are left out; a pod still waiting to run is Starting.
func (p *Provider) List(ctx context.Context) ([]provider.Instance, error) {
	pods := p.pods.list()
	out := make([]provider.Instance, 0, len(pods))
	for _, pod := range pods {
		id := pod.Annotations[AnnotationNode]
		if id == "" || pod.DeletionTimestamp != nil {
			continue
		}
		out = append(out, provider.Instance{NodeID: id, ProviderID: pod.UID,
			Running: pod.Status.Phase == PodRunning, Starting: pod.Status.Phase == PodPending})
	}
	return out, nil
}

// Watch reports node events from the pod watch until ctx ends. Each
// node's events are reported when they change, not on every pod update.
func (p *Provider) Watch(ctx context.Context, fn func(provider.Event)) error {
	report := func(ev provider.Event, ok bool) {
		if !ok {
			return
		}
		p.mu.Lock()
		same := p.last[ev.NodeID] == ev
		p.last[ev.NodeID] = ev
		if ev.Kind == provider.EventGone {
			delete(p.last, ev.NodeID)
		}
		p.mu.Unlock()
		if !same {
			fn(ev)
		}
	}
	remove := p.pods.addHandler(func(pod *Pod, deleted bool) { report(eventOf(pod, deleted)) })
	<-ctx.Done()
	remove()
	return nil
}
