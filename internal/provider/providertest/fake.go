package providertest

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Fake is a recording provider for the unit tests of controllers, the
// daemon and the server: its nodes exist only in memory (no agent runs, so
// none registers), every call is recorded, and Create can be told to fail.
// It stands in for what a test does not need to be real; the real
// providers pass Run.
//
// Set NextCreateErr and AllowedCreateCalls, and read the calls, between
// the calls of the code under test, or inside Locked while that code may
// call the fake concurrently (a running daemon).
type Fake struct {
	mu sync.Mutex

	// CreateCalls are the specs of every Create call since Reset, failed
	// ones included.
	CreateCalls []provider.NodeSpec
	// Created are the ids of the nodes Create made since Reset, in order,
	// deleted ones included.
	Created []string
	// DeleteCalls are the node ids of every Delete call since Reset.
	DeleteCalls []string
	// NextCreateErr, when set, is what the next Create returns (nothing
	// is created); it is cleared by that call.
	NextCreateErr error
	// AllowedCreateCalls bounds how many nodes Create makes since Reset;
	// a Create of a new node beyond fails with ErrCreateCallsExhausted,
	// wrapped in a provider.InsufficientCapacityError: the fake is a cloud
	// with room for that many.
	AllowedCreateCalls int

	nodes map[string]provider.NodeSpec
}

var _ provider.Provider = (*Fake)(nil)

// ErrCreateCallsExhausted is what a Create beyond AllowedCreateCalls
// returns (wrapped in a provider.InsufficientCapacityError).
var ErrCreateCallsExhausted = errors.New("the fake provider's AllowedCreateCalls are used up")

// NewFake is a Fake with no nodes that creates as many as it is asked for.
func NewFake() *Fake {
	f := &Fake{}
	f.Reset()
	return f
}

// Reset forgets the calls and the nodes, and lets every Create succeed.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.CreateCalls, f.Created, f.DeleteCalls = nil, nil, nil
	f.NextCreateErr, f.AllowedCreateCalls = nil, math.MaxInt
	f.nodes = map[string]provider.NodeSpec{}
}

// Locked runs fn with the fake locked: fn may set NextCreateErr or
// AllowedCreateCalls and read the calls while other goroutines call the
// fake.
func (f *Fake) Locked(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// Name is "fake".
func (f *Fake) Name() string { return "fake" }

// Create records the call and, unless told to fail, the node (a node that
// exists keeps its id).
func (f *Fake) Create(_ context.Context, spec provider.NodeSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.CreateCalls = append(f.CreateCalls, spec)
	if err := f.NextCreateErr; err != nil {
		f.NextCreateErr = nil
		return "", err
	}
	if _, ok := f.nodes[spec.NodeID]; ok {
		return providerID(spec.NodeID), nil
	}
	if len(f.Created) >= f.AllowedCreateCalls {
		return "", provider.NewInsufficientCapacityError(ErrCreateCallsExhausted)
	}
	f.nodes[spec.NodeID] = spec
	f.Created = append(f.Created, spec.NodeID)
	return providerID(spec.NodeID), nil
}

func providerID(nodeID string) string { return "fake:" + nodeID }

// Delete records the call and forgets the node; an unknown node is nil.
func (f *Fake) Delete(_ context.Context, nodeID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.DeleteCalls = append(f.DeleteCalls, nodeID)
	delete(f.nodes, nodeID)
	return nil
}

// List returns every node created and not deleted, as Running.
func (f *Fake) List(context.Context) ([]provider.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]provider.Instance, 0, len(f.nodes))
	for id := range f.nodes {
		out = append(out, provider.Instance{NodeID: id, ProviderID: providerID(id), Running: true})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].NodeID < out[k].NodeID })
	return out, nil
}

// Node is the spec a node that exists was created with.
func (f *Fake) Node(nodeID string) (provider.NodeSpec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	spec, ok := f.nodes[nodeID]
	return spec, ok
}

// Nodes are the ids of the nodes that exist (created, not deleted), sorted.
func (f *Fake) Nodes() []string {
	ins, _ := f.List(context.Background())
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.NodeID
	}
	return out
}
