package daemon

import (
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// networkEnforcement says which network isolation settings the provider
// puts into effect here: the local provider enforces subnets and no public
// IP when it can make network namespaces (it probes once, at start); the
// others none. lp is the local provider when it does, else nil.
func networkEnforcement(prov provider.Provider, o Options) (n server.NetworkEnforcement, lp *local.Provider) {
	n.Provider = o.Provider
	lp, _ = prov.(*local.Provider)
	if lp == nil {
		return n, nil
	}
	if err := lp.ProbeNetwork(); err != nil {
		o.Log.Info("subnet and enableNodePublicIp false are refused: the local provider cannot place nodes in network namespaces here: "+err.Error(), "component", "provider")
		return n, nil
	}
	n.Subnets, n.NoPublicIP = true, true
	n.Explain = func(c api.Compute) string {
		a, sub := c.Aml(), ""
		if a.Subnet != nil {
			sub = a.Subnet.ID
		}
		return local.DescribeNetwork(sub, c.ID)
	}
	if isolated, _ := lp.Isolation(); o.JobsAsServerUser || !isolated {
		o.Log.Warn("jobs are not isolated, so a job of a node in a subnet runs as root in its network namespace and can leave it; the network isolation of subnets holds only against isolated jobs", "component", "provider")
	}
	return n, lp
}
