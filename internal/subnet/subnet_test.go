package subnet

import (
	"strings"
	"testing"
)

func TestPlanFor(t *testing.T) {
	a := PlanFor("10.231.", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/a", "c1")
	if a != PlanFor("10.231.", "/SUBSCRIPTIONS/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/A", "c2") {
		t.Error("a subnet's plan depends on the case of its id or on the compute")
	}
	if own := PlanFor("10.231.", "", "c1"); own == a || own == PlanFor("10.231.", "", "c2") {
		t.Error("a cluster without a subnet should have a network of its own")
	}
	for _, id := range []string{"x", "y", "z", "/long/" + strings.Repeat("q", 300)} {
		p := PlanFor("10.232.", id, "")
		if len(p.Hex) != 8 || p.X < 0 || p.X >= Range {
			t.Errorf("plan of %s = %+v: want 8 hex digits and X in 0-249", id, p)
		}
		if !strings.HasPrefix(p.CIDR(), "10.232.") || !strings.HasSuffix(p.CIDR(), ".0/24") || !strings.HasSuffix(p.HostIP(), ".1") {
			t.Errorf("plan of %s = %s %s", id, p.CIDR(), p.HostIP())
		}
	}
}

// The rules keep the subnet's own traffic and the control plane's port
// above the drops.
func TestRulesOrder(t *testing.T) {
	r := Rules("cmbx", 8787)
	if strings.Join(r[0], " ") != "FORWARD -i cmbx -o cmbx -j ACCEPT" || r[len(r)-1][len(r[len(r)-1])-1] != "DROP" ||
		strings.Join(r[3], " ") != "INPUT -i cmbx -p tcp --dport 8787 -j ACCEPT" {
		t.Errorf("rules: %v", r)
	}
}

// A node's way out opens nothing but its own address, toward anything but
// the subnets' bridges, and only replies come back.
func TestEgressRules(t *testing.T) {
	r := EgressRules("cmbx", BridgesPattern("cmb"), "10.231.7.2")
	if strings.Join(r[0], " ") != "FORWARD -i cmbx -s 10.231.7.2/32 ! -o cmb+ -j ACCEPT" ||
		strings.Join(r[1], " ") != "FORWARD -o cmbx -d 10.231.7.2/32 -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT" {
		t.Errorf("egress rules: %v", r)
	}
	if n := strings.Join(NATRule("cmb+", "10.231.7.2"), " "); n != "POSTROUTING -s 10.231.7.2/32 ! -o cmb+ -j MASQUERADE" {
		t.Errorf("nat rule: %s", n)
	}
}
