package kubernetes

import (
	"context"
	"net/url"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The node pods of a subnet carry its label, and NetworkPolicies select
// them: only the subnet's pods connect in; a pod without a public IP
// reaches only the subnet, DNS and the control plane's address and port.
// A pod of the same subnet with a public IP is not held by the egress
// policy, a pod without a subnet by neither. When the subnet's last pod
// goes, so do its policies. (The lab's API server stores NetworkPolicies
// but nothing enforces them: a cluster's network plugin does.)
func TestSubnetNetworkPolicies(t *testing.T) {
	e := newEnv(t)
	p := e.provider(t)
	ctx := context.Background()
	if err := p.ProbeNetwork(); err != nil {
		t.Fatalf("ProbeNetwork: %v", err)
	}
	const sub = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/a"
	private, public, plain := e.spec("kt-private"), e.spec("kt-public"), e.spec("kt-plain")
	private.Subnet, private.NoPublicIP = sub, true
	public.Subnet = sub
	for _, s := range []string{private.NodeID, public.NodeID, plain.NodeID} {
		t.Cleanup(func() { p.Delete(context.Background(), s) })
	}
	if _, err := p.Create(ctx, private); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(ctx, public); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	hex := subnetHex(private)
	pods := lab.Client.CoreV1().Pods(e.ns)
	podLabels := map[string]labels.Set{}
	for _, id := range []string{private.NodeID, public.NodeID, plain.NodeID} {
		pod, err := pods.Get(ctx, PodName(id), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		podLabels[id] = pod.Labels
	}
	if l := podLabels[private.NodeID]; l[LabelSubnet] != hex || l[LabelPublicIP] != "false" {
		t.Errorf("labels of the private pod: %v", l)
	}
	if l := podLabels[public.NodeID]; l[LabelSubnet] != hex || l[LabelPublicIP] != "true" {
		t.Errorf("labels of the public pod: %v", l)
	}

	nps := lab.Client.NetworkingV1().NetworkPolicies(e.ns)
	get := func(name string) *networkingv1.NetworkPolicy {
		t.Helper()
		np, err := nps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("NetworkPolicy %s: %v", name, err)
		}
		return np
	}
	selects := func(sel metav1.LabelSelector, id string) bool {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(podLabels[id])
	}
	in := get(p.policyName(hex, false))
	if !selects(in.Spec.PodSelector, private.NodeID) || !selects(in.Spec.PodSelector, public.NodeID) || selects(in.Spec.PodSelector, plain.NodeID) {
		t.Errorf("ingress policy selects %v: want both pods of the subnet and not the plain one", in.Spec.PodSelector)
	}
	if len(in.Spec.Ingress) != 1 || len(in.Spec.Ingress[0].From) != 1 || in.Spec.Ingress[0].From[0].PodSelector == nil ||
		!selects(*in.Spec.Ingress[0].From[0].PodSelector, public.NodeID) || selects(*in.Spec.Ingress[0].From[0].PodSelector, plain.NodeID) {
		t.Errorf("ingress rules %+v: want only the subnet's pods", in.Spec.Ingress)
	}
	out := get(p.policyName(hex, true))
	if !selects(out.Spec.PodSelector, private.NodeID) || selects(out.Spec.PodSelector, public.NodeID) || selects(out.Spec.PodSelector, plain.NodeID) {
		t.Errorf("egress policy selects %v: want only the pod without a public IP", out.Spec.PodSelector)
	}
	if len(out.Spec.PolicyTypes) != 1 || out.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("egress policy types %v", out.Spec.PolicyTypes)
	}
	u, _ := url.Parse(e.srv.URL)
	var subnetPeer, dns, controlPlane bool
	for _, r := range out.Spec.Egress {
		for _, to := range r.To {
			if to.PodSelector != nil && selects(*to.PodSelector, public.NodeID) && !selects(*to.PodSelector, plain.NodeID) {
				subnetPeer = true
			}
			if to.IPBlock != nil && to.IPBlock.CIDR == u.Hostname()+"/32" && len(r.Ports) == 1 && r.Ports[0].Port.String() == u.Port() {
				controlPlane = true
			}
			if to.IPBlock != nil && to.IPBlock.CIDR != u.Hostname()+"/32" {
				t.Errorf("egress to %s: only the control plane's address is allowed", to.IPBlock.CIDR)
			}
		}
		if len(r.To) == 0 {
			for _, port := range r.Ports {
				if port.Port.IntValue() != 53 {
					t.Errorf("egress to any address on port %s: only DNS is allowed", port.Port)
				}
				dns = true
			}
		}
	}
	if !subnetPeer || !dns || !controlPlane {
		t.Errorf("egress rules %+v: want the subnet's pods (%v), DNS (%v) and the control plane %s (%v)", out.Spec.Egress, subnetPeer, dns, e.srv.URL, controlPlane)
	}

	// The policies stay while a pod of the subnet does, and go with the last.
	if err := p.Delete(ctx, private.NodeID); err != nil {
		t.Fatal(err)
	}
	if _, err := nps.Get(ctx, p.policyName(hex, false), metav1.GetOptions{}); err != nil {
		t.Errorf("the ingress policy went while a pod of the subnet is left: %v", err)
	}
	if err := p.Delete(ctx, public.NodeID); err != nil {
		t.Fatal(err)
	}
	if list, err := nps.List(ctx, metav1.ListOptions{LabelSelector: LabelSubnet + "=" + hex}); err != nil || len(list.Items) != 0 {
		t.Errorf("policies left after the subnet's last pod: %d, %v", len(list.Items), err)
	}
}
