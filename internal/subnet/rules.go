package subnet

import "strconv"

// Rules are the iptables rules that fence a subnet's bridge, topmost
// first: the nodes of the subnet reach each other (also where bridged
// traffic goes through iptables) and the control plane's port on the
// host; nothing is forwarded into or out of the subnet, nothing else on
// the host answers it.
func Rules(bridge string, port int) [][]string {
	return append([][]string{
		{"FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"},
		{"FORWARD", "-i", bridge, "-j", "DROP"},
		{"FORWARD", "-o", bridge, "-j", "DROP"},
	}, InputRules(bridge, port)...)
}

// InputRules are the rules of Rules for what the host answers, for a
// bridge whose forwarding is fenced already (Docker's internal networks).
func InputRules(bridge string, port int) [][]string {
	return [][]string{
		{"INPUT", "-i", bridge, "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "ACCEPT"},
		{"INPUT", "-i", bridge, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
		{"INPUT", "-i", bridge, "-j", "DROP"},
	}
}

// BridgesPattern is the iptables interface pattern of every subnet bridge
// a provider makes, given their prefix ("cmb" matches cmb+).
func BridgesPattern(prefix string) string { return prefix + "+" }

// EgressRules are the filter rules, topmost first, that give one node of a
// fenced subnet (address ip) a route out, as a public IP does in Azure:
// its connections out are forwarded, to anywhere but the subnets' bridges
// (bridges: BridgesPattern), and their replies come back. Nothing new
// comes in. Above Rules, they open nothing for the subnet's other nodes.
func EgressRules(bridge, bridges, ip string) [][]string {
	return [][]string{
		{"FORWARD", "-i", bridge, "-s", ip + "/32", "!", "-o", bridges, "-j", "ACCEPT"},
		{"FORWARD", "-o", bridge, "-d", ip + "/32", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
	}
}

// NATRule is the nat table's rule that makes the node at ip leave the host
// with the host's address on the way out (the subnet's range is known
// only to the host).
func NATRule(bridges, ip string) []string {
	return []string{"POSTROUTING", "-s", ip + "/32", "!", "-o", bridges, "-j", "MASQUERADE"}
}
