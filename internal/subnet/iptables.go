package subnet

import (
	"fmt"
	"os/exec"
	"strings"
)

// Fence puts rules (Rules or InputRules) in place, each once, topmost as
// listed.
func Fence(rules [][]string) error {
	for i := len(rules) - 1; i >= 0; i-- { // each goes on top: the first ends topmost
		r := rules[i]
		if exec.Command("iptables", append([]string{"-w", "-C"}, r...)...).Run() == nil {
			continue
		}
		if err := Run("iptables", append([]string{"-w", "-I", r[0], "1"}, r[1:]...)...); err != nil {
			return err
		}
	}
	return nil
}

// FenceNAT puts a nat table rule in place, once.
func FenceNAT(rule []string) error {
	if exec.Command("iptables", append([]string{"-w", "-t", "nat", "-C"}, rule...)...).Run() == nil {
		return nil
	}
	return Run("iptables", append([]string{"-w", "-t", "nat", "-I", rule[0], "1"}, rule[1:]...)...)
}

// Unroute removes the EgressRules and NATRule of a node (every copy).
func Unroute(bridge, bridges, ip string) {
	for _, r := range EgressRules(bridge, bridges, ip) {
		for i := 0; i < 10 && exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).Run() == nil; i++ {
		}
	}
	r := NATRule(bridges, ip)
	for i := 0; i < 10 && exec.Command("iptables", append([]string{"-w", "-t", "nat", "-D"}, r...)...).Run() == nil; i++ {
	}
}

// Unfence removes a bridge's Rules (every copy).
func Unfence(bridge string, port int) {
	for _, r := range Rules(bridge, port) {
		for i := 0; i < 10 && exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).Run() == nil; i++ {
		}
	}
}

// Run runs a command; its failure carries its output.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// UnfenceAll removes every INPUT and FORWARD rule that names bridge, for
// a bridge whose control-plane port is not known any more.
func UnfenceAll(bridge string) {
	for _, chain := range []string{"INPUT", "FORWARD"} {
		out, err := exec.Command("iptables", "-w", "-S", chain).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || !namesBridge(f, bridge) {
				continue
			}
			_ = exec.Command("iptables", append([]string{"-w", "-D"}, f[1:]...)...).Run()
		}
	}
}

// namesBridge reports whether a rule (iptables -S fields) matches packets
// in or out of bridge.
func namesBridge(f []string, bridge string) bool {
	for i := 0; i+1 < len(f); i++ {
		if (f[i] == "-i" || f[i] == "-o") && f[i+1] == bridge {
			return true
		}
	}
	return false
}
