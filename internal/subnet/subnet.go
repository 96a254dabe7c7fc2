// Package subnet holds what the providers that place nodes in a network
// per subnet share: which network a node belongs to, the range and bridge
// name that network gets, and the firewall rules that fence a bridge (see
// rules.go). It decides; iptables.go applies the rules.
package subnet

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Key is the network a node belongs to: its compute's subnet (ARM ids are
// case-insensitive), or a network of the compute's own when it has none.
func Key(subnet, computeID string) string {
	if subnet != "" {
		return strings.ToLower(subnet)
	}
	return "compute:" + strings.ToLower(computeID)
}

// Hash is 8 hex digits of a hash of s, and the hash.
func Hash(s string) (string, uint32) {
	h := fnv.New32a()
	h.Write([]byte(s))
	v := h.Sum32()
	return fmt.Sprintf("%08x", v), v
}

// Range is how many /24 ranges a provider's base (e.g. "10.231.") offers
// subnets: X in base+X+".0/24" is below it; X 250–255 are left for tests
// and others.
const Range = 250

// Plan is where the nodes of one subnet go: a /24 range under a base and
// a bridge (or network) name.
type Plan struct {
	Hex  string // 8 hex digits of the subnet's key: names its bridge
	Base string // e.g. "10.231."
	X    int    // the range is Base+X+".0/24"
}

// PlanFor maps a subnet (or a compute, when it has none) to its range
// under base.
func PlanFor(base, subnet, computeID string) Plan {
	hex, v := Hash(Key(subnet, computeID))
	return Plan{Hex: hex, Base: base, X: int(v % Range)}
}

// HostIP is the range's .1 address: the host's end, where the control
// plane serves the subnet's nodes.
func (p Plan) HostIP() string { return p.Addr(1) }

// Addr is the range's address .k.
func (p Plan) Addr(k int) string { return p.Base + strconv.Itoa(p.X) + "." + strconv.Itoa(k) }

// CIDR is the subnet's range.
func (p Plan) CIDR() string { return p.Base + strconv.Itoa(p.X) + ".0/24" }
