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
	// SubnetPublicIP: nodes in a subnet can also have a public IP (a
	// route beyond the subnet). Without it a subnet needs
	// enableNodePublicIp false.
	SubnetPublicIP bool
	// Explain, when set, says where a compute's nodes are placed (e.g.
	// the bridge and address range), for Describe.
	Explain func(c api.Compute) string
}

// checkNetwork refuses the isolation settings of a new compute that the
// provider does not enforce.
func (s *Server) checkNetwork(c api.Compute) error {
	a, n := c.Aml(), s.cfg.Network
	var v api.Validation
	why := " Cumulus stores no setting it cannot enforce: remove it, or run the server with a provider that enforces it (see docs/providers.md)"
	subnet := a.Subnet != nil && a.Subnet.ID != ""
	public := a.EnableNodePublicIP == nil || *a.EnableNodePublicIP
	if subnet && !n.Subnets {
		v.Add(api.CodeValidationError, "properties.properties.subnet", "provider %s does not place nodes in subnets, so subnet %s would have no effect.%s", n.Provider, a.Subnet.ID, why)
	}
	if !public && !n.NoPublicIP {
		v.Add(api.CodeValidationError, "properties.properties.enableNodePublicIp", "provider %s does not cut nodes off from other networks, so enableNodePublicIp false would have no effect.%s", n.Provider, why)
	}
	if subnet && n.Subnets && public && !n.SubnetPublicIP {
		v.Add(api.CodeValidationError, "properties.properties.enableNodePublicIp", "provider %s gives the nodes of a subnet no route beyond it, so a subnet needs enableNodePublicIp false (see docs/providers.md)", n.Provider)
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
	subnet := n.Subnets && a.Subnet != nil && a.Subnet.ID != ""
	private := n.NoPublicIP && a.EnableNodePublicIP != nil && !*a.EnableNodePublicIP
	if subnet || private {
		s := "a network of the cluster's own"
		if subnet {
			s = "subnet " + a.Subnet.ID
		}
		if n.Explain != nil {
			if e := n.Explain(c); e != "" {
				s += ": " + e
			}
		}
		return s
	}
	if n.Provider == "" {
		return "none: the nodes share the network of the machines they run on"
	}
	return "none: the nodes share the network of the machines the " + n.Provider + " provider runs them on"
}
