package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/subnet"
)

// Network isolation (root only, with the engine on this machine). The
// nodes of a subnet (or, for enableNodePublicIp false without a subnet, of
// a network of the cluster's own) are containers on a Docker network of
// their own instead of the host's: an --internal bridge network
// cumulus-subnet-<8 hex> on 10.232.X.0/24 whose bridge, cms<8 hex>, has
// the .1 address. There the control plane serves the subnet's agents;
// iptables rules on the bridge (subnet.InputRules) answer nothing else on
// the host, and Docker forwards nothing into or out of an internal
// network. A node with a public IP is also on
// cumulus-egress-<8 hex> (10.233.X.0/24, bridge cme<8 hex>), a plain bridge
// network with the engine's NAT: its route beyond the subnet. Job
// containers join their node's network namespace (--network
// container:<node>), so a job has its node's address and reach.

// Networks, bridges and ranges.
const (
	subnetNetPrefix    = "cumulus-subnet-"
	egressNetPrefix    = "cumulus-egress-"
	subnetBridgePrefix = "cms"
	egressBridgePrefix = "cme"
	subnetBase         = "10.232."
	egressBase         = "10.233."
	// LabelSubnet is on a node container in a subnet, and on the
	// networks the provider makes: the subnet network's name.
	LabelSubnet = "cumulus.subnet"
)

// netPlan is where the nodes of one subnet go.
type netPlan struct{ subnet.Plan }

func planNetwork(sub, computeID string) netPlan {
	return netPlan{subnet.PlanFor(subnetBase, sub, computeID)}
}

// planOfNetwork is the plan of a subnet network, from its name.
func planOfNetwork(name string) (netPlan, bool) {
	hex, ok := strings.CutPrefix(name, subnetNetPrefix)
	v, err := strconv.ParseUint(hex, 16, 32)
	if !ok || err != nil || len(hex) != 8 {
		return netPlan{}, false
	}
	return netPlan{subnet.Plan{Hex: hex, Base: subnetBase, X: int(v % subnet.Range)}}, true
}

func (n netPlan) name() string         { return subnetNetPrefix + n.Hex }
func (n netPlan) bridge() string       { return subnetBridgePrefix + n.Hex }
func (n netPlan) egressName() string   { return egressNetPrefix + n.Hex }
func (n netPlan) egressBridge() string { return egressBridgePrefix + n.Hex }
func (n netPlan) egress() subnet.Plan  { return subnet.Plan{Hex: n.Hex, Base: egressBase, X: n.X} }

// ProbeNetwork reports why this provider cannot place nodes in networks of
// their own here (nil when it can): it needs root and iptables (it fences
// the bridges), the engine on this machine (the bridges are this
// machine's), and a way to serve the control plane on the bridges.
func (p *Provider) ProbeNetwork() error {
	if p.o.ControlPlane == nil {
		return errors.New("the control plane cannot serve on the subnets' bridges")
	}
	if os.Geteuid() != 0 {
		return errors.New("the server does not run as root (it fences the subnets' bridges with iptables)")
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		return fmt.Errorf("the Docker engine is not on this machine (DOCKER_HOST=%s): the subnets' bridges would not be either", h)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("no iptables: %w", err)
	}
	return subnet.Run("iptables", "-w", "-S", "INPUT")
}

// SubnetPublicIP is true: a node with a public IP reaches beyond its
// subnet through a network of the engine's NAT.
func (p *Provider) SubnetPublicIP() bool { return true }

// DescribeNetwork says where the nodes of a compute go.
func (p *Provider) DescribeNetwork(sub, computeID string, publicIP bool) string {
	n := planNetwork(sub, computeID)
	s := fmt.Sprintf("node containers on Docker network %s (%s, bridge %s), reaching the control plane at %s", n.name(), n.CIDR(), n.bridge(), n.HostIP())
	if publicIP {
		return s + ", and beyond through the engine's NAT on network " + n.egressName()
	}
	return s + " and nothing beyond"
}

// BridgeAddrs are the bridge addresses of this control plane's subnet
// networks, so that a control plane that starts again serves them again.
func (p *Provider) BridgeAddrs() []string {
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	out, err := p.docker(ctx, nil, "network", "ls", "--format", "{{.Name}}", "--filter", "label="+LabelOwner+"="+p.o.Owner,
		"--filter", "name="+subnetNetPrefix)
	if err != nil {
		p.o.Log.Warn("list subnet networks", "err", err)
		return nil
	}
	var ips []string
	for _, name := range strings.Fields(string(out)) {
		if n, ok := planOfNetwork(name); ok {
			ips = append(ips, n.HostIP())
		}
	}
	return ips
}

// nodeNetwork is what runArgs needs of a node in a subnet.
type nodeNetwork struct {
	plan         netPlan
	controlPlane provider.Endpoint // the control plane on the subnet's bridge
	public       bool              // also on the egress network
}

// joinNetwork makes (or finds) the networks of a node's subnet, fences the
// subnet's bridge and has the control plane served on it. The caller
// holds p.netMu.
func (p *Provider) joinNetwork(ctx context.Context, spec provider.NodeSpec) (*nodeNetwork, error) {
	if p.o.ControlPlane == nil || os.Geteuid() != 0 {
		return nil, provider.Configurationf("the docker provider cannot place nodes in networks here (see the server's log at start)")
	}
	n := &nodeNetwork{plan: planNetwork(spec.Subnet, spec.ComputeID), public: !spec.NoPublicIP}
	if err := p.ensureNetwork(ctx, n.plan.name(), n.plan.bridge(), n.plan.Plan, true); err != nil {
		return nil, err
	}
	cp, err := p.o.ControlPlane(n.plan.HostIP())
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(cp.URL)
	if err != nil {
		return nil, provider.Configurationf("control plane URL %q: %w", cp.URL, err)
	}
	port, err := strconv.Atoi(pu.Port())
	if err != nil {
		return nil, provider.Configurationf("control plane URL %q has no port", cp.URL)
	}
	// Docker drops what would be forwarded into or out of an internal
	// network; the host itself answers it only on the control plane's port.
	if err := subnet.Fence(subnet.InputRules(n.plan.bridge(), port)); err != nil {
		return nil, err
	}
	n.controlPlane = cp
	if n.public {
		if err := p.ensureNetwork(ctx, n.plan.egressName(), n.plan.egressBridge(), n.plan.egress(), false); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// ensureNetwork makes a bridge network with a fixed range, bridge name
// and gateway (.1) unless it exists.
func (p *Provider) ensureNetwork(ctx context.Context, name, bridge string, r subnet.Plan, internal bool) error {
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	if _, err := p.docker(ctx, nil, "network", "inspect", "--format", "{{.Id}}", name); err == nil {
		return nil
	} else if !isNoSuch(err) && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("network %s: %w", name, err)
	}
	args := []string{"network", "create", "--driver", "bridge", "--subnet", r.CIDR(), "--gateway", r.HostIP(),
		"--opt", "com.docker.network.bridge.name=" + bridge,
		"--label", LabelOwner + "=" + p.o.Owner, "--label", LabelSubnet + "=" + name}
	if internal {
		args = append(args, "--internal")
	}
	_, err := p.docker(ctx, nil, append(args, name)...)
	switch {
	case err == nil:
		p.o.Log.Info("subnet network created", "network", name, "range", r.CIDR(), "internal", internal)
		return nil
	case strings.Contains(err.Error(), "already exists"):
		return nil
	case strings.Contains(err.Error(), "overlap"):
		return provider.Configurationf("range %s of network %s overlaps another network on this machine: remove that one or use another subnet: %w", r.CIDR(), name, err)
	}
	return fmt.Errorf("create network %s: %w", name, err)
}

// leaveNetwork removes a subnet's networks and their bridge's rules once
// no container is on the subnet network. The caller holds p.netMu.
func (p *Provider) leaveNetwork(ctx context.Context, name string) {
	n, ok := planOfNetwork(name)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	out, err := p.docker(ctx, nil, "network", "inspect", "--format", "{{len .Containers}}", name)
	if err != nil {
		if !isNoSuch(err) && !strings.Contains(err.Error(), "not found") {
			p.o.Log.Warn("inspect subnet network", "network", name, "err", err)
		}
		return
	}
	if strings.TrimSpace(string(out)) != "0" {
		return
	}
	for _, net := range []string{n.egressName(), name} {
		if _, err := p.docker(ctx, nil, "network", "rm", net); err != nil && !isNoSuch(err) && !strings.Contains(err.Error(), "not found") {
			p.o.Log.Warn("remove subnet network", "network", net, "err", err)
		}
	}
	subnet.UnfenceAll(n.bridge())
	p.o.Log.Info("subnet network removed: its last node is gone", "network", name)
}

// networkArgs are the docker create arguments that put a node on its
// subnet's network, in place of the host's.
func networkArgs(n *nodeNetwork, container string) []string {
	return []string{"--network", n.plan.name(), "--label", LabelSubnet + "=" + n.plan.name(),
		"--env", "CUMULUS_JOB_NETWORK=container:" + container}
}

// startInNetworks starts a created node container after connecting it to
// its egress network; it removes the container when either fails.
func (p *Provider) startInNetworks(ctx context.Context, n *nodeNetwork, id string) error {
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	var err error
	if n.public {
		_, err = p.docker(ctx, nil, "network", "connect", n.plan.egressName(), id)
	}
	if err == nil {
		_, err = p.docker(ctx, nil, "start", id)
	}
	if err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer rcancel()
		_ = p.removeContainers(rctx, id)
	}
	return err
}
