package cluster

import (
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider/kubernetes"
	"github.com/cumulus-ml/cumulus/test/kubelab"
)

// `cumulus serve --provider kubernetes` takes a compute with a subnet and
// no public IP: its node pods carry the subnet's label, two
// NetworkPolicies select them (the egress one allows the control plane's
// address and port), its compute says so, a 2-node job rendezvouses, and
// the policies go when the cluster scales to zero. (The lab's API server
// stores the policies; nothing here enforces them.)
func TestKubernetesSubnetNetworkPolicies(t *testing.T) {
	bin := buildRendezvous(t)
	s := startKubeServer(t)
	zero, max, public := int32(0), int32(2), false
	c := api.Compute{Name: "k8s-sub"}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT5S"}
	a.Subnet = &api.ResourceRef{ID: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/k"}
	a.EnableNodePublicIP = &public
	tol := kubelab.Toleration
	a.Kubernetes = &api.KubernetesPlacement{NodeSelector: map[string]string{"type": "fake"},
		Tolerations: []api.Toleration{{Key: tol.Key, Operator: string(tol.Operator), Value: tol.Value, Effect: string(tol.Effect)}}}
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.c.GetCompute(bctx, "k8s-sub")
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Aml().NetworkIsolation; !strings.Contains(d, "NetworkPolicy") || !strings.Contains(d, "network plugin") {
		t.Errorf("networkIsolation = %q, want the NetworkPolicies and who enforces them", d)
	}

	s.submitJob(distributedJob("k8s-sub-torch", "k8s-sub", bin, 2, "PyTorch", 1))
	var policies []string
	waitFor(t, "the subnet's node pods and policies", 60*time.Second, func() bool {
		pods := s.pods()
		l, err := s.lab.Client.NetworkingV1().NetworkPolicies(s.ns).List(bctx, metav1.ListOptions{})
		if err != nil || len(pods) == 0 || len(l.Items) != 2 {
			return false
		}
		policies = nil
		for _, np := range l.Items {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if !sel.Matches(labels.Set(p.Labels)) {
					t.Errorf("policy %s does not select node pod %s (labels %v)", np.Name, p.Name, p.Labels)
				}
			}
			policies = append(policies, np.Name)
			if strings.HasSuffix(np.Name, "-egress") {
				u, _ := url.Parse("http://" + s.addr)
				found := false
				for _, r := range np.Spec.Egress {
					for _, to := range r.To {
						if to.IPBlock != nil && to.IPBlock.CIDR == u.Hostname()+"/32" && len(r.Ports) == 1 && r.Ports[0].Port.String() == u.Port() {
							found = true
						}
					}
				}
				if !found {
					t.Errorf("egress policy %s does not allow the control plane at %s: %+v", np.Name, s.addr, np.Spec.Egress)
				}
			}
		}
		return true
	})
	s.waitJob("k8s-sub-torch", api.JobCompleted, 90*time.Second)
	if got := s.rankLog("k8s-sub-torch", 0); !strings.Contains(got, "rank 0 of 2: sum=1") {
		t.Errorf("rank 0 log = %q", got)
	}
	waitFor(t, "the subnet's policies to go with its last pod", 90*time.Second, func() bool {
		l, err := s.lab.Client.NetworkingV1().NetworkPolicies(s.ns).List(bctx, metav1.ListOptions{LabelSelector: kubernetes.LabelSubnet})
		return err == nil && len(l.Items) == 0 && len(s.pods()) == 0
	})
	t.Logf("policies while the cluster had nodes: %v", policies)
}
