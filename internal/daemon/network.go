package daemon

import (
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/docker"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// networkEnforcement says which network isolation settings the provider
// puts into effect here: a provider that places nodes in networks per
// subnet (provider.Networks) enforces subnets and no public IP when it can
// here (it probes once, at start); the others none. nw is that provider
// when it does, else nil.
func networkEnforcement(prov provider.Provider, o Options) (n server.NetworkEnforcement, nw provider.Networks) {
	n.Provider = prov.Name()
	nw, _ = prov.(provider.Networks)
	if nw == nil {
		return n, nil
	}
	if err := nw.ProbeNetwork(); err != nil {
		o.Log.Info("subnet and enableNodePublicIp false are refused: the "+prov.Name()+" provider cannot place nodes in networks of their own here: "+err.Error(), "component", "provider")
		return n, nil
	}
	n.Subnets, n.NoPublicIP, n.SubnetPublicIP = true, true, nw.SubnetPublicIP()
	n.Explain = func(c api.Compute) string {
		a, sub := c.Aml(), ""
		if a.Subnet != nil {
			sub = a.Subnet.ID
		}
		return nw.DescribeNetwork(sub, c.ID, a.EnableNodePublicIP == nil || *a.EnableNodePublicIP)
	}
	switch p := prov.(type) {
	case *local.Provider:
		if isolated, _ := p.Isolation(); o.JobsAsServerUser || !isolated {
			o.Log.Warn("jobs are not isolated, so a job of a node in a subnet runs as root in its network namespace and can leave it; the network isolation of subnets holds only against isolated jobs", "component", "provider")
		}
	case *docker.Provider:
		o.Log.Warn("a job on a docker node can use the node's Docker socket to start containers outside its subnet; the network isolation of subnets holds only against jobs that do not (see docs/providers.md)", "component", "provider")
	}
	return n, nw
}
