package kubernetes

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/cumulus-ml/cumulus/internal/endpoints"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/subnet"
)

// Network isolation. The node pods of a compute with a subnet (or, for
// enableNodePublicIp false without a subnet, of a network of the
// compute's own) carry the label cumulus.dev/subnet=<8 hex of the subnet>,
// and NetworkPolicies of this control plane (the owner label's value
// ends their names) select them: cumulus-subnet-<hex>-<owner> lets only
// the subnet's pods connect to them; for pods without a public IP
// (cumulus.dev/public-ip=false), cumulus-subnet-<hex>-<owner>-egress lets
// them connect only to the subnet's pods, DNS and the control plane. The
// cluster's network plugin enforces NetworkPolicies, or nothing does.

// Labels of node pods in a subnet.
const (
	LabelSubnet   = "cumulus.dev/subnet"    // 8 hex of the subnet (subnet.Key)
	LabelPublicIP = "cumulus.dev/public-ip" // "false" for enableNodePublicIp false
	policyPrefix  = "cumulus-subnet-"
)

var _ provider.Networks = (*Provider)(nil)

// subnetHex is the subnet label of a node in a subnet, "" for one without.
func subnetHex(spec provider.NodeSpec) string {
	if spec.Subnet == "" && !spec.NoPublicIP {
		return ""
	}
	hex, _ := subnet.Hash(subnet.Key(spec.Subnet, spec.ComputeID))
	return hex
}

// ProbeNetwork reports whether this identity may manage NetworkPolicies in
// the namespace (nil when it may).
func (p *Provider) ProbeNetwork() error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := p.api.do(ctx, "GET", p.policiesPath()+"?limit=1", "", nil, nil); err != nil {
		return fmt.Errorf("cannot list NetworkPolicies in namespace %s (let this identity manage networkpolicies): %w", p.o.Namespace, err)
	}
	return nil
}

// SubnetPublicIP is true: a pod with a public IP keeps the pod network's
// way out; only connections into it are limited to its subnet.
func (p *Provider) SubnetPublicIP() bool { return true }

// DescribeNetwork says how a compute's pods are isolated.
func (p *Provider) DescribeNetwork(sub, computeID string, publicIP bool) string {
	hex, _ := subnet.Hash(subnet.Key(sub, computeID))
	s := fmt.Sprintf("node pods labelled %s=%s; NetworkPolicy %s lets only the subnet's pods connect to them", LabelSubnet, hex, p.policyName(hex, false))
	if !publicIP {
		s += fmt.Sprintf(", and %s lets them reach only the subnet, DNS and the control plane", p.policyName(hex, true))
	}
	return s + " (enforced by the cluster's network plugin, where it enforces NetworkPolicies)"
}

// BridgeAddrs is empty: the control plane serves pods where it always does.
func (p *Provider) BridgeAddrs() []string { return nil }

// policiesPath is the NetworkPolicy collection of the namespace.
func (p *Provider) policiesPath() string {
	return "/apis/networking.k8s.io/v1/namespaces/" + url.PathEscape(p.o.Namespace) + "/networkpolicies"
}

// policyName is the name of a subnet's ingress or egress NetworkPolicy.
func (p *Provider) policyName(hex string, egress bool) string {
	name := policyPrefix + hex + "-" + p.ownerLabel
	if egress {
		name += "-egress"
	}
	return name
}

// subnetLabels adds a node pod's network labels.
func subnetLabels(spec provider.NodeSpec, labels map[string]string) {
	if hex := subnetHex(spec); hex != "" {
		labels[LabelSubnet] = hex
		labels[LabelPublicIP] = strconv.FormatBool(!spec.NoPublicIP)
	}
}

// peer is an address and port the pods of a subnet without a public IP
// may connect to.
type peer struct {
	cidr string
	port int
}

// controlPlanePeers are the control plane's addresses and ports, from the
// agents' server URL (one or several replicas); host names are resolved.
func controlPlanePeers(serverURL string) ([]peer, error) {
	urls, err := endpoints.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	var out []peer
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("control plane URL %q: %w", s, err)
		}
		port, _ := strconv.Atoi(u.Port())
		if port == 0 {
			port = map[string]int{"http": 80, "https": 443}[u.Scheme]
		}
		ips := []net.IP{net.ParseIP(u.Hostname())}
		if ips[0] == nil {
			if ips, err = net.LookupIP(u.Hostname()); err != nil {
				return nil, fmt.Errorf("control plane host %s: %w", u.Hostname(), err)
			}
		}
		for _, ip := range ips {
			bits := "/32"
			if ip.To4() == nil {
				bits = "/128"
			}
			out = append(out, peer{cidr: ip.String() + bits, port: port})
		}
	}
	return out, nil
}

// policiesFor are the NetworkPolicies of a node's subnet (none for a
// node without one).
func (p *Provider) policiesFor(spec provider.NodeSpec, controlPlane []peer) []*NetworkPolicy {
	hex := subnetHex(spec)
	if hex == "" {
		return nil
	}
	meta := func(name string) ObjectMeta {
		return ObjectMeta{Name: name, Namespace: p.o.Namespace,
			Labels:      map[string]string{LabelManagedBy: managedBy, LabelOwner: p.ownerLabel, LabelSubnet: hex},
			Annotations: map[string]string{AnnotationOwner: p.o.Owner, "cumulus.dev/subnet-id": subnet.Key(spec.Subnet, spec.ComputeID)}}
	}
	inSubnet := LabelSelector{MatchLabels: map[string]string{LabelOwner: p.ownerLabel, LabelSubnet: hex}}
	ingress := &NetworkPolicy{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy",
		ObjectMeta: meta(p.policyName(hex, false)), Spec: NetworkPolicySpec{
			PodSelector: inSubnet,
			PolicyTypes: []string{PolicyTypeIngress},
			Ingress:     []NetworkPolicyIngressRule{{From: []NetworkPolicyPeer{{PodSelector: &inSubnet}}}},
		}}
	if !spec.NoPublicIP {
		return []*NetworkPolicy{ingress}
	}
	private := LabelSelector{MatchLabels: map[string]string{LabelOwner: p.ownerLabel, LabelSubnet: hex, LabelPublicIP: "false"}}
	dns := int32(53)
	rules := []NetworkPolicyEgressRule{
		{To: []NetworkPolicyPeer{{PodSelector: &inSubnet}}},
		{Ports: []NetworkPolicyPort{{Protocol: "UDP", Port: &dns}, {Protocol: "TCP", Port: &dns}}},
	}
	for _, cp := range controlPlane {
		port := int32(cp.port)
		rules = append(rules, NetworkPolicyEgressRule{
			To:    []NetworkPolicyPeer{{IPBlock: &IPBlock{CIDR: cp.cidr}}},
			Ports: []NetworkPolicyPort{{Protocol: "TCP", Port: &port}},
		})
	}
	egress := &NetworkPolicy{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy",
		ObjectMeta: meta(p.policyName(hex, true)), Spec: NetworkPolicySpec{
			PodSelector: private,
			PolicyTypes: []string{PolicyTypeEgress},
			Egress:      rules,
		}}
	return []*NetworkPolicy{ingress, egress}
}

// ensurePolicies creates (or updates) the NetworkPolicies of a node's
// subnet before its pod exists.
func (p *Provider) ensurePolicies(ctx context.Context, spec provider.NodeSpec) error {
	if subnetHex(spec) == "" {
		return nil
	}
	var cp []peer
	if spec.NoPublicIP {
		var err error
		if cp, err = controlPlanePeers(spec.ServerURL); err != nil {
			return fmt.Errorf("the egress NetworkPolicy of node %s: %w", spec.NodeID, err)
		}
	}
	for _, np := range p.policiesFor(spec, cp) {
		err := p.api.do(ctx, "POST", p.policiesPath(), "", np, nil)
		if isAlreadyExists(err) {
			path := p.policiesPath() + "/" + url.PathEscape(np.Name)
			var cur NetworkPolicy
			if err = p.api.do(ctx, "GET", path, "", nil, &cur); err == nil {
				np.ResourceVersion = cur.ResourceVersion
				err = p.api.do(ctx, "PUT", path, "", np, nil)
			}
		}
		if err != nil {
			return fmt.Errorf("NetworkPolicy %s: %w", np.Name, typed(err))
		}
	}
	return nil
}

// releasePolicies deletes a subnet's NetworkPolicies once none of this
// owner's pods is in it (but for ones terminating). It reads the pods from
// the API server, not the watch cache, which may not have seen a pod just
// created; p.netMu keeps a Create from making a pod in between.
func (p *Provider) releasePolicies(ctx context.Context, hex string) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	sel := selector(map[string]string{LabelOwner: p.ownerLabel, LabelSubnet: hex})
	var pods PodList
	if err := p.api.do(ctx, "GET", p.podsPath()+"?"+url.Values{"labelSelector": {sel}}.Encode(), "", nil, &pods); err != nil {
		p.o.Log.Warn("list the pods of a subnet", "subnet", hex, "err", err)
		return
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			return
		}
	}
	for _, name := range []string{p.policyName(hex, false), p.policyName(hex, true)} {
		if err := p.api.do(ctx, "DELETE", p.policiesPath()+"/"+url.PathEscape(name), "", nil, nil); err != nil && !isNotFound(err) {
			p.o.Log.Warn("delete NetworkPolicy", "policy", name, "err", err)
		}
	}
}
