package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// Isolation settings no provider here enforces are refused at create with
// an ARM error naming the field and the provider, and nothing is stored;
// the defaults (public IP, no subnet) are accepted.
func TestUnenforcedNetworkSettingsRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for field, value := range map[string]any{
		"subnet":             map[string]any{"id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n"},
		"enableNodePublicIp": false,
		"isolatedNetwork":    true,
	} {
		body := computeBody(func(m map[string]any) { inner(m)[field] = value })
		r := h.do("PUT", computePath("isolated"), body).want(t, 400)
		checkErrorShape(t, field, r)
		if !strings.Contains(string(r.Body), "properties.properties."+field) || !strings.Contains(string(r.Body), "would have no effect") {
			t.Errorf("%s: %s", field, r.Body)
		}
		h.do("GET", computePath("isolated"), nil).want(t, 404)
	}
	c := h.create("open", computeBody(func(m map[string]any) { inner(m)["enableNodePublicIp"] = true }))
	if got := c.Aml().NetworkIsolation; !strings.HasPrefix(got, "none: ") {
		t.Errorf("networkIsolation = %q, want it to say there is none", got)
	}
}

// A provider that enforces subnets without public IPs only accepts a
// subnet with enableNodePublicIp false, and enableNodePublicIp false
// alone; networkIsolation then says where the nodes are.
func TestEnforcedNetworkSettings(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) {
		c.Network = server.NetworkEnforcement{Provider: "local", Subnets: true, NoPublicIP: true,
			Explain: func(api.Compute) string { return "on bridge cmb0" }}
	}})
	subnet := map[string]any{"id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n"}
	r := h.do("PUT", computePath("public"), computeBody(func(m map[string]any) { inner(m)["subnet"] = subnet })).want(t, 400)
	if !strings.Contains(string(r.Body), "properties.properties.enableNodePublicIp") || !strings.Contains(string(r.Body), "no route beyond it") {
		t.Errorf("subnet with a public IP: %s", r.Body)
	}
	c := h.create("sub", computeBody(func(m map[string]any) { inner(m)["subnet"] = subnet; inner(m)["enableNodePublicIp"] = false }))
	if got := c.Aml().NetworkIsolation; got != "subnet "+subnet["id"].(string)+": on bridge cmb0" {
		t.Errorf("networkIsolation = %q", got)
	}
	c = h.create("private", computeBody(func(m map[string]any) { inner(m)["enableNodePublicIp"] = false }))
	if got := c.Aml().NetworkIsolation; got != "a network of the cluster's own: on bridge cmb0" {
		t.Errorf("networkIsolation = %q", got)
	}
	h.do("PUT", computePath("iso"), computeBody(func(m map[string]any) { inner(m)["isolatedNetwork"] = true })).want(t, 400)
}

// A provider that gives subnet nodes a way out (docker's NAT) takes a
// subnet with a public IP, and says so.
func TestSubnetWithPublicIPWhereEnforced(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) {
		c.Network = server.NetworkEnforcement{Provider: "docker", Subnets: true, NoPublicIP: true, SubnetPublicIP: true,
			Explain: func(c api.Compute) string {
				if p := c.Aml().EnableNodePublicIP; p == nil || *p {
					return "with NAT"
				}
				return "no way out"
			}}
	}})
	subnet := map[string]any{"id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n"}
	c := h.create("public", computeBody(func(m map[string]any) { inner(m)["subnet"] = subnet }))
	if got := c.Aml().NetworkIsolation; got != "subnet "+subnet["id"].(string)+": with NAT" {
		t.Errorf("networkIsolation = %q", got)
	}
	h.do("PUT", computePath("iso"), computeBody(func(m map[string]any) { inner(m)["isolatedNetwork"] = true })).want(t, 400)
}
