package controller

import (
	"context"
	"errors"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// fakeProvider records calls and can be told to fail the next creates
// (used only in controller unit tests; real providers pass the
// conformance suite in provider/providertest).
type fakeProvider struct {
	mu        sync.Mutex
	nodes     map[string]provider.NodeSpec
	created   []string
	deleted   []string
	failNext  int
	createErr error
}

var _ provider.Provider = (*fakeProvider)(nil)

func newFakeProvider() *fakeProvider { return &fakeProvider{nodes: map[string]provider.NodeSpec{}} }

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Create(_ context.Context, s provider.NodeSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		if f.createErr == nil {
			return "", errors.New("capacity not available")
		}
		return "", f.createErr
	}
	f.nodes[s.NodeID] = s
	f.created = append(f.created, s.NodeID)
	return "fake:" + s.NodeID, nil
}

func (f *fakeProvider) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, id)
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeProvider) List(context.Context) ([]provider.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []provider.Instance
	for id := range f.nodes {
		out = append(out, provider.Instance{NodeID: id, ProviderID: "fake:" + id, Running: true})
	}
	return out, nil
}

func (f *fakeProvider) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.nodes)
}
