package local

import (
	"net"
	"strings"
	"testing"
)

func TestPlanSubnet(t *testing.T) {
	a := PlanSubnet("/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/a", "c1")
	if a != PlanSubnet("/SUBSCRIPTIONS/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/A", "c2") {
		t.Error("a subnet's plan depends on the case of its id or on the compute")
	}
	if own := PlanSubnet("", "c1"); own == a || own == PlanSubnet("", "c2") {
		t.Error("a cluster without a subnet should have a network of its own")
	}
	for _, id := range []string{"x", "y", "z", "/long/" + strings.Repeat("q", 300)} {
		p := PlanSubnet(id, "")
		if len(p.Bridge) > 15 || !strings.HasPrefix(p.Bridge, "cmb") || p.X < 0 || p.X >= 250 {
			t.Errorf("plan of %s = %+v: want a bridge name of at most 15 characters and 10.231.0-249", id, p)
		}
		if !strings.HasPrefix(p.CIDR(), "10.231.") || !strings.HasSuffix(p.HostIP(), ".1") {
			t.Errorf("plan of %s = %s %s", id, p.CIDR(), p.HostIP())
		}
	}
	if n := NamespaceName("node-1"); len(n) > 15 || n == NamespaceName("node-2") || len(vethName("node-1")) > 15 {
		t.Errorf("namespace %s, veth %s", n, vethName("node-1"))
	}
}

func TestClash(t *testing.T) {
	out := `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
2: eth0    inet 10.231.7.5/24 brd 10.231.7.255 scope global eth0\       valid_lft forever preferred_lft forever
3: cmb1234abcd    inet 10.231.9.1/24 scope global cmb1234abcd
4: wide    inet 10.0.0.1/8 scope global wide`
	_, seven, _ := net.ParseCIDR("10.231.7.0/24")
	if dev, _ := clash(out, seven, "cmbx"); dev != "eth0" {
		t.Errorf("clash with eth0's address: got %q", dev)
	}
	_, nine, _ := net.ParseCIDR("10.231.9.0/24")
	if dev, _ := clash(out, nine, "cmb1234abcd"); dev != "wide" {
		t.Errorf("the bridge's own address is no clash, a /8 around it is: got %q", dev)
	}
	_, other, _ := net.ParseCIDR("192.168.3.0/24")
	if dev, _ := clash(out, other, "cmbx"); dev != "" {
		t.Errorf("no clash expected, got %q", dev)
	}
}
