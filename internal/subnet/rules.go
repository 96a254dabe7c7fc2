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
