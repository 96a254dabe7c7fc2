package distrib

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// The ports of a distributed job: rank 0's rendezvous port (MASTER_PORT)
// first, then one port per process (TensorFlow task i listens on
// MasterPort+1+i on its node) or per node (an MPI launch's launcher on
// node r at MasterPort+1+r): a block of 1 + nodes × processes per node.
// Blocks lie in [PortLow, PortHigh), below Linux's ephemeral range
// (32768–60999), from which the kernel picks the ports of outgoing
// connections and of listeners that ask for any port: a port there may
// be taken by any program at any time; below it, only by a program that
// asks for that very port.
const (
	PortLow  = 20000
	PortHigh = 32768
)

// PortBlock is how many ports a job of nodes nodes and ppn processes per
// node uses from its MasterPort on.
func PortBlock(nodes, ppn int) int { return 1 + max(nodes, 1)*max(ppn, 1) }

// MasterPort is the first port of the block of one attempt of job uid: a
// hash of the job and attempt spreads the blocks over the range, so that
// the jobs of several control planes on one machine fall apart and an
// attempt that found a port taken starts again elsewhere. The nodes check
// their ports before they start (ListenPorts).
func MasterPort(uid string, attempt, block int) int {
	h := fnv.New32a()
	h.Write([]byte(uid + "/" + strconv.Itoa(attempt)))
	span := max(PortHigh-PortLow-block, 1)
	return PortLow + int(h.Sum32()%uint32(span))
}

// ListenPorts are the ports node nodeRank listens on for its part of a job
// (not counting an MPI launcher's, which the launcher binds itself): the
// rendezvous port on node 0, TensorFlow's tasks on their nodes.
func ListenPorts(d *agentapi.Distribution, nodeRank int) []int {
	if d == nil || d.MasterPort <= 0 {
		return nil
	}
	var ports []int
	if strings.EqualFold(d.Type, TensorFlow) {
		ppn := max(d.ProcessesPerNode, 1)
		for local := range ppn {
			ports = append(ports, d.MasterPort+1+nodeRank*ppn+local)
		}
		return ports
	}
	if nodeRank == 0 {
		ports = append(ports, d.MasterPort)
	}
	return ports
}
