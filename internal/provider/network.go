package provider

// ControlPlane serves the control plane on a host address of a subnet's
// network (its bridge's .1) and returns where the subnet's agents reach it.
type ControlPlane func(hostIP string) (Endpoint, error)

// Endpoint is where the agents of a subnet reach the control plane.
type Endpoint struct {
	URL string
	// TLSServerName is the name the agents check the server's certificate
	// for, since it does not name the bridge's address ("" for plain HTTP).
	TLSServerName string
}

// Networks is a provider that places the nodes of a compute with a subnet,
// or with enableNodePublicIp false, in a network of their own (see
// NodeSpec.Subnet and NoPublicIP).
type Networks interface {
	// ProbeNetwork says why the provider cannot do so here; nil when it
	// can. It is asked once, at start.
	ProbeNetwork() error
	// SubnetPublicIP reports whether the nodes of a subnet may also have a
	// route beyond it (enableNodePublicIp true).
	SubnetPublicIP() bool
	// DescribeNetwork says where the nodes of a compute go, for its
	// networkIsolation.
	DescribeNetwork(subnet, computeID string, publicIP bool) string
	// BridgeAddrs are the host addresses where the control plane serves
	// the nodes already in subnets (after a restart).
	BridgeAddrs() []string
}
