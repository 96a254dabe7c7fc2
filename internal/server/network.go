package server

import (
	"github.com/cumulus-ml/cumulus/internal/api"
)

// NetworkEnforcement says which network isolation settings the server's
// provider puts into effect. A setting the provider cannot enforce is
// refused when a compute is created: a setting that looks honoured and is
// not would be worse than an error.
type NetworkEnforcement struct {
	Provider   string // the provider's name, for errors
	Subnets    bool   // places nodes in a network per subnet
	NoPublicIP bool   // keeps nodes without enableNodePublicIp off every network but their subnet's and the control plane
	Isolated   bool   // isolatedNetwork
}

// checkNetwork refuses the isolation settings of a new compute that the
// provider does not enforce.
func (s *Server) checkNetwork(c api.Compute) error {
	a, n := c.Aml(), s.cfg.Network
	var v api.Validation
	why := " Cumulus stores no setting it cannot enforce: remove it, or run the server with a provider that enforces it (see docs/providers.md)"
	if a.Subnet != nil && a.Subnet.ID != "" && !n.Subnets {
		v.Add(api.CodeValidationError, "properties.properties.subnet", "provider %s does not place nodes in subnets, so subnet %s would have no effect.%s", n.Provider, a.Subnet.ID, why)
	}
	if a.EnableNodePublicIP != nil && !*a.EnableNodePublicIP && !n.NoPublicIP {
		v.Add(api.CodeValidationError, "properties.properties.enableNodePublicIp", "provider %s does not cut nodes off from other networks, so enableNodePublicIp false would have no effect.%s", n.Provider, why)
	}
	if a.IsolatedNetwork != nil && *a.IsolatedNetwork && !n.Isolated {
		v.Add(api.CodeValidationError, "properties.properties.isolatedNetwork", "provider %s does not isolate networks, so isolatedNetwork true would have no effect.%s", n.Provider, why)
	}
	return v.Err()
}

// Describe says what isolation a compute's nodes have, for GET and the
// studio.
func (n NetworkEnforcement) Describe(c api.Compute) string {
	a := c.Aml()
	if n.Subnets && a.Subnet != nil && a.Subnet.ID != "" {
		return "subnet " + a.Subnet.ID
	}
	if n.Provider == "" {
		return "none: the nodes share the network of the machines they run on"
	}
	return "none: the nodes share the network of the machines the " + n.Provider + " provider runs them on"
}
