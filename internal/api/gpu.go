package api

import (
	"fmt"
	"strings"
)

// GPUWaitPrefix begins the status message of a queued job that waits for
// the machine's GPUs: the nodes it needs cannot be given devices now.
const GPUWaitPrefix = "waiting for GPUs: "

// GPUNeed is what a cluster's node that cannot be placed now needs of the
// machine the provider's nodes share (Block of kind BlockGPUs): it holds
// Need devices, and fewer are free. String words it.
type GPUNeed struct {
	Need  int         // devices one node holds
	Free  int         // devices of the machine a node may hold that no node holds
	Total int         // devices of the machine a node may hold
	Held  []GPUHolder // who holds the others, most first
}

// GPUHolder is how many devices the nodes of one compute hold.
type GPUHolder struct {
	Compute string // its name
	Devices int
}

// String is the block in words: "needs 2 GPUs; 1 of 4 free: 3 held by
// nodes of gpu-a".
func (b GPUNeed) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "needs %d %s; %d of %d free", b.Need, plural(b.Need, "GPU"), b.Free, b.Total)
	for i, h := range b.Held {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&s, "%s%d held by nodes of %s", sep, h.Devices, h.Compute)
	}
	return s.String()
}
