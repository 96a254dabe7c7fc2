// Package provider defines where nodes come from. A provider acts, it
// never decides: the controllers record intent in the store first, then
// call Create/Delete, and reconcile with List after a restart.
package provider

import (
	"context"
	"errors"
)

// ErrNotFound is returned (wrapped) when a provider has no such node.
var ErrNotFound = errors.New("node not found in provider")

// NodeSpec is everything a provider needs to start one node's agent.
type NodeSpec struct {
	NodeID      string
	ComputeID   string
	VMSize      string
	VCPUs       int
	MemoryGB    float64
	GPUs        int
	LowPriority bool
	ServerURL   string // where the agent reaches the control plane
	CAFile      string // CA the agent trusts for ServerURL ("" for plain HTTP or system roots)
	JoinToken   string // one-time token the agent registers with
}

// Instance is a node as the provider sees it.
type Instance struct {
	NodeID     string
	ProviderID string
	Running    bool
}

// Provider creates and deletes nodes. Every method is idempotent: Create
// of a node that exists returns its id; Delete of a node that is gone
// returns nil.
type Provider interface {
	Name() string
	Create(ctx context.Context, spec NodeSpec) (providerID string, err error)
	Delete(ctx context.Context, nodeID string) error
	List(ctx context.Context) ([]Instance, error)
}

// ValidNodeID reports whether a node id is safe as a folder, process
// argument and container name.
func ValidNodeID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
