package distrib

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Every port of a job's block lies below the kernel's ephemeral range,
// the block of a job's next attempt is elsewhere, and the same job number
// on two control planes (their uids differ) gets different blocks.
func TestMasterPort(t *testing.T) {
	moved := 0
	for i := range 2000 {
		uid := fmt.Sprintf("job-%04d", i)
		block := PortBlock(1+i%64, 1+i%8)
		p := MasterPort(uid, 1, block)
		if p < PortLow || p+block > PortHigh {
			t.Fatalf("job %s: ports %d–%d; want them in [%d, %d)", uid, p, p+block-1, PortLow, PortHigh)
		}
		if p != MasterPort(uid, 1, block) {
			t.Fatalf("job %s: the master port changed between two calls", uid)
		}
		if MasterPort(uid, 2, block) != p {
			moved++
		}
	}
	if moved < 1990 {
		t.Errorf("only %d of 2000 jobs got other ports for their next attempt", moved)
	}
	if MasterPort("3f1c…-server-a", 1, 5) == MasterPort("9b2e…-server-b", 1, 5) {
		t.Error("two jobs of different uids share their block")
	}
}

// A node checks the ports it will listen on: node 0 the rendezvous port,
// each node its TensorFlow tasks' ports.
func TestListenPorts(t *testing.T) {
	for _, tc := range []struct {
		d    *agentapi.Distribution
		rank int
		want []int
	}{
		{nil, 0, nil},
		{&agentapi.Distribution{Type: "PyTorch", ProcessesPerNode: 2, MasterPort: 21000}, 0, []int{21000}},
		{&agentapi.Distribution{Type: "PyTorch", ProcessesPerNode: 2, MasterPort: 21000}, 1, nil},
		{&agentapi.Distribution{Type: "Mpi", MasterPort: 21000}, 0, []int{21000}},
		{&agentapi.Distribution{Type: "TensorFlow", ProcessesPerNode: 2, MasterPort: 21000}, 0, []int{21001, 21002}},
		{&agentapi.Distribution{Type: "TensorFlow", ProcessesPerNode: 2, MasterPort: 21000}, 1, []int{21003, 21004}},
	} {
		if got := ListenPorts(tc.d, tc.rank); !slices.Equal(got, tc.want) {
			t.Errorf("ListenPorts(%+v, %d) = %v; want %v", tc.d, tc.rank, got, tc.want)
		}
	}
}
