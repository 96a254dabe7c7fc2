package server_test

import (
	"strings"
	"testing"
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
