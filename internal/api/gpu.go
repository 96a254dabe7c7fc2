package api

import (
	"fmt"
	"strings"
)

// GPUWaitPrefix begins the status message of a queued job that waits for
// the machine's GPUs: the nodes it needs cannot be given devices now.
const GPUWaitPrefix = "waiting for GPUs: "

// GPUBlock is why a cluster cannot add a node now: its nodes each hold
// Need devices of the machine the provider's nodes share, and fewer are
// free. It is a value the decisions make; String words it.
type GPUBlock struct {
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
func (b GPUBlock) String() string {
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

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
