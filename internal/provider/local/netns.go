package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/subnet"
)

// Network isolation (root only). The nodes of a subnet (or, for
// enableNodePublicIp false without a subnet, of a network of the cluster's
// own) each run in a network namespace of their own, joined by a veth pair
// to a Linux bridge per subnet. The bridge has 10.231.X.1/24, the nodes
// 10.231.X.k/24; the namespaces have no default route, so a node reaches its
// subnet and the control plane, which serves on the bridge's .1 address, and
// nothing else. iptables rules per bridge keep the host from forwarding
// anything into or out of the subnet and accept nothing from it on the host
// but the control plane's port.
//
// A node of a subnet with a public IP (enableNodePublicIp true, Azure's
// default) also reaches out, as in Azure: its namespace has a default route
// through the bridge's .1, and rules for its address alone forward its
// connections out of the host (to anywhere but the subnets' bridges),
// masqueraded behind the host's address, and their replies back. Nothing
// new comes in; the subnet's nodes without a public IP stay fenced.

// Network names and addresses.
const (
	bridgePrefix = "cmb" // + 8 hex of the subnet: a bridge
	nsPrefix     = "cmn" // + 8 hex of the node id: a node's namespace
	vethPrefix   = "cmv" // + 8 hex of the node id: the host end of its veth
	netFile      = "net.json"
	netBase      = "10.231." // subnets are 10.231.X.0/24 (see subnet.Range)
	netnsDir     = "/run/netns"
)

// NetPlan is where the nodes of one subnet go.
type NetPlan struct {
	subnet.Plan
	Bridge string // cmb + 8 hex
}

// PlanSubnet maps a subnet (or a compute, when it has none) to its bridge
// and range.
func PlanSubnet(sub, computeID string) NetPlan {
	p := subnet.PlanFor(netBase, sub, computeID)
	return NetPlan{Plan: p, Bridge: bridgePrefix + p.Hex}
}

// NamespaceName is the network namespace of a node.
func NamespaceName(nodeID string) string { hex, _ := subnet.Hash(nodeID); return nsPrefix + hex }

func vethName(nodeID string) string { hex, _ := subnet.Hash(nodeID); return vethPrefix + hex }

// nodeNet is what a node's folder records of its network (net.json).
type nodeNet struct {
	Bridge    string `json:"bridge"`
	X         int    `json:"x"`
	K         int    `json:"k"` // the node is 10.231.X.K
	Namespace string `json:"namespace"`
	Veth      string `json:"veth"`
	Port      int    `json:"port"`             // the control plane's port on the bridge
	Public    bool   `json:"public,omitempty"` // has a route out (a public IP)
}

func (n nodeNet) plan() NetPlan {
	return NetPlan{Plan: subnet.Plan{Hex: strings.TrimPrefix(n.Bridge, bridgePrefix), Base: netBase, X: n.X}, Bridge: n.Bridge}
}
func (n nodeNet) ip() string { return n.plan().Addr(n.K) }

// ProbeNetwork reports why this provider cannot place nodes in network
// namespaces here (nil when it can): it needs root, ip, nsenter and
// iptables, a way to serve the control plane on the bridges, and makes and
// removes a namespace to be sure.
func (p *Provider) ProbeNetwork() error {
	if os.Geteuid() != 0 {
		return errors.New("the server does not run as root")
	}
	if p.o.ControlPlane == nil {
		return errors.New("the control plane cannot serve on the subnets' bridges")
	}
	for _, tool := range []string{"ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("no %s: %w", tool, err)
		}
	}
	ns := fmt.Sprintf("%sprobe%d", nsPrefix, os.Getpid())
	if err := subnet.Run("ip", "netns", "add", ns); err != nil {
		return err
	}
	if err := subnet.Run("ip", "netns", "del", ns); err != nil {
		return err
	}
	if err := subnet.Run("iptables", "-w", "-S", "INPUT"); err != nil {
		return err
	}
	return nil
}

// SubnetPublicIP is true: a node of a subnet with a public IP has a route
// out through NAT on its subnet's bridge.
func (p *Provider) SubnetPublicIP() bool { return true }

// DescribeNetwork says where the nodes of a compute are, for its
// networkIsolation.
func (p *Provider) DescribeNetwork(sub, computeID string, publicIP bool) string {
	n := PlanSubnet(sub, computeID)
	if publicIP {
		return fmt.Sprintf("nodes in network namespaces on bridge %s (%s), with a route out through NAT on the host (a public IP) and the control plane at %s; nothing comes in from outside the subnet", n.Bridge, n.CIDR(), n.HostIP())
	}
	return fmt.Sprintf("nodes in network namespaces on bridge %s (%s), no route beyond it but the control plane at %s", n.Bridge, n.CIDR(), n.HostIP())
}

// BridgeAddrs are the bridge addresses the nodes in the node folders use,
// so that a control plane that starts again serves them again.
func (p *Provider) BridgeAddrs() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range p.nodeNets("") {
		if ip := n.plan().HostIP(); !seen[ip] {
			seen[ip] = true
			out = append(out, ip)
		}
	}
	return out
}

// nodeNets reads the net.json of every node folder (but skip's).
func (p *Provider) nodeNets(skip string) []nodeNet {
	files, _ := filepath.Glob(filepath.Join(p.o.BaseDir, "*", netFile))
	var out []nodeNet
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) == skip {
			continue
		}
		if n, ok := readNet(f); ok {
			out = append(out, n)
		}
	}
	return out
}

func readNet(path string) (nodeNet, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nodeNet{}, false
	}
	var n nodeNet
	return n, json.Unmarshal(b, &n) == nil && n.Bridge != ""
}

// setupNetwork places a node in its subnet: the bridge (and its firewall
// rules), the node's namespace and veth. It returns the agent's command
// prefix, its address and the server URL it uses. The caller holds p.mu.
func (p *Provider) setupNetwork(nodeID, dir, sub, computeID string, public bool) (prefix []string, addr string, cp provider.Endpoint, err error) {
	if os.Geteuid() != 0 || p.o.ControlPlane == nil {
		return nil, "", cp, provider.Configurationf("the local provider cannot place nodes in networks here (see the server's log at start)")
	}
	plan := PlanSubnet(sub, computeID)
	n, ok := readNet(filepath.Join(dir, netFile))
	if !ok || n.Bridge != plan.Bridge {
		n = nodeNet{Bridge: plan.Bridge, X: plan.X, Namespace: NamespaceName(nodeID), Veth: vethName(nodeID)}
		used := map[int]bool{}
		for _, o := range p.nodeNets(nodeID) {
			if o.Bridge == n.Bridge {
				used[o.K] = true
			}
		}
		for k := 2; k < 255; k++ {
			if !used[k] {
				n.K = k
				break
			}
		}
		if n.K == 0 {
			return nil, "", cp, provider.InsufficientCapacityf("subnet %s (%s) is full: 253 nodes", sub, plan.CIDR())
		}
	}
	if err := ensureBridge(plan); err != nil {
		return nil, "", cp, err
	}
	if cp, err = p.o.ControlPlane(plan.HostIP()); err != nil {
		return nil, "", cp, err
	}
	u, err := url.Parse(cp.URL)
	if err != nil {
		return nil, "", cp, provider.Configurationf("control plane URL %q: %w", cp.URL, err)
	}
	if n.Port, err = strconv.Atoi(u.Port()); err != nil {
		return nil, "", cp, provider.Configurationf("control plane URL %q has no port", cp.URL)
	}
	if err := subnet.Fence(subnet.Rules(n.Bridge, n.Port)); err != nil {
		return nil, "", cp, err
	}
	n.Public = n.Public || public // a route once given is taken away with the node
	b, _ := json.Marshal(n)
	if err := os.WriteFile(filepath.Join(dir, netFile), b, 0o600); err != nil {
		return nil, "", cp, err
	}
	if err := ensureNamespace(n); err != nil {
		p.teardownNetwork(nodeID, dir)
		return nil, "", cp, err
	}
	if public {
		if err := p.routeOut(n); err != nil {
			p.teardownNetwork(nodeID, dir)
			return nil, "", cp, fmt.Errorf("give node %s a route out: %w", nodeID, err)
		}
	}
	return []string{"nsenter", "--net=" + filepath.Join(netnsDir, n.Namespace), "--"}, n.ip(), cp, nil
}

// teardownNetwork removes a node's namespace and veth, and its bridge
// when no other node uses it. The caller holds p.mu; the node's processes
// are gone.
func (p *Provider) teardownNetwork(nodeID, dir string) {
	n, ok := readNet(filepath.Join(dir, netFile))
	if !ok {
		return
	}
	if _, err := os.Stat(filepath.Join(netnsDir, n.Namespace)); err == nil {
		if err := subnet.Run("ip", "netns", "del", n.Namespace); err != nil {
			p.o.Log.Warn("remove node namespace", "node", nodeID, "namespace", n.Namespace, "err", err)
		}
	}
	if linkExists(n.Veth) {
		_ = subnet.Run("ip", "link", "del", n.Veth)
	}
	if n.Public {
		subnet.Unroute(n.Bridge, subnet.BridgesPattern(bridgePrefix), n.ip())
	}
	_ = os.Remove(filepath.Join(dir, netFile))
	for _, o := range p.nodeNets(nodeID) {
		if o.Bridge == n.Bridge {
			return
		}
	}
	subnet.Unfence(n.Bridge, n.Port)
	if linkExists(n.Bridge) {
		if err := subnet.Run("ip", "link", "del", n.Bridge); err != nil {
			p.o.Log.Warn("remove subnet bridge", "bridge", n.Bridge, "err", err)
		}
	}
	p.o.Log.Info("subnet bridge removed: its last node is gone", "bridge", n.Bridge)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ensureBridge makes the subnet's bridge with its .1 address, after
// checking that no other interface has an address in its range.
func ensureBridge(plan NetPlan) error {
	_, want, _ := net.ParseCIDR(plan.CIDR())
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return fmt.Errorf("ip addr show: %w", err)
	}
	if dev, addr := clash(string(out), want, plan.Bridge); dev != "" {
		return provider.Configurationf("subnet range %s of bridge %s clashes with %s on interface %s: remove that address or use another subnet", plan.CIDR(), plan.Bridge, addr, dev)
	}
	if !linkExists(plan.Bridge) {
		if err := subnet.Run("ip", "link", "add", plan.Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := subnet.Run("ip", "addr", "replace", plan.HostIP()+"/24", "dev", plan.Bridge); err != nil {
		return err
	}
	return subnet.Run("ip", "link", "set", plan.Bridge, "up")
}

// clash returns an interface other than bridge with an address that
// overlaps want, from `ip -o -4 addr show`.
func clash(ipAddrOutput string, want *net.IPNet, bridge string) (dev, addr string) {
	for _, line := range strings.Split(ipAddrOutput, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" || len(f) < 2 {
				continue
			}
			ip, nw, err := net.ParseCIDR(f[i+1])
			if err != nil {
				continue
			}
			if name := strings.TrimSuffix(f[1], ":"); name != bridge && (want.Contains(ip) || nw.Contains(want.IP)) {
				return name, f[i+1]
			}
		}
	}
	return "", ""
}

// ensureNamespace makes the node's namespace with loopback up and its end
// of a veth pair (eth0, 10.231.X.K/24, no default route) whose host end is
// on the bridge.
func ensureNamespace(n nodeNet) error {
	if _, err := os.Stat(filepath.Join(netnsDir, n.Namespace)); err != nil {
		if err := subnet.Run("ip", "netns", "add", n.Namespace); err != nil {
			return err
		}
	}
	if !linkExists(n.Veth) {
		if err := subnet.Run("ip", "link", "add", n.Veth, "type", "veth", "peer", "name", "eth0", "netns", n.Namespace); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"link", "set", n.Veth, "master", n.Bridge, "up"},
		{"-n", n.Namespace, "link", "set", "lo", "up"},
		{"-n", n.Namespace, "addr", "replace", n.ip() + "/24", "dev", "eth0"},
		{"-n", n.Namespace, "link", "set", "eth0", "up"},
	} {
		if err := subnet.Run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// routeOut gives a node of a subnet its public IP's way out: a default
// route through the bridge's .1, the host's forwarding, and the rules for
// its address alone (subnet.EgressRules, subnet.NATRule).
func (p *Provider) routeOut(n nodeNet) error {
	if err := subnet.Run("ip", "-n", n.Namespace, "route", "replace", "default", "via", n.plan().HostIP()); err != nil {
		return err
	}
	if err := p.ensureForwarding(); err != nil {
		return err
	}
	bridges := subnet.BridgesPattern(bridgePrefix)
	if err := subnet.Fence(subnet.EgressRules(n.Bridge, bridges, n.ip())); err != nil {
		return err
	}
	return subnet.FenceNAT(subnet.NATRule(bridges, n.ip()))
}

// ipForward is the host's IPv4 forwarding switch.
const ipForward = "/proc/sys/net/ipv4/ip_forward"

// ensureForwarding turns the host's IPv4 forwarding on, as a container
// engine does for its NAT: without it no node's packet leaves the host.
// The firewall rules decide what is forwarded.
func (p *Provider) ensureForwarding() error {
	b, err := os.ReadFile(ipForward)
	if err != nil {
		return fmt.Errorf("read %s: %w", ipForward, err)
	}
	if strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(ipForward, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("turn IPv4 forwarding on (%s): %w", ipForward, err)
	}
	p.o.Log.Warn("turned the host's IPv4 forwarding on, for the nodes of subnets with a public IP; firewall rules forward only their connections out")
	return nil
}
