// Package providertest is the conformance suite every node provider
// passes (local, docker, kubernetes, sim): a provider's test calls Run with
// a constructor and a node spec that reaches a live control plane or a
// StubServer that keeps agents alive. It also holds Fake, the recording
// provider for the unit tests of the code that calls providers.
package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// RunningTimeout is how long a created node may take to show as Running.
var RunningTimeout = 30 * time.Second

// Run checks the provider contract: Create is idempotent by node id, List
// shows created nodes as Running, Delete removes them and is idempotent,
// Delete of an unknown node is nil.
func Run(t *testing.T, newProvider func(t *testing.T) provider.Provider, spec func(nodeID string) provider.NodeSpec) {
	t.Helper()

	t.Run("Name", func(t *testing.T) {
		if newProvider(t).Name() == "" {
			t.Error("Name() is empty")
		}
	})

	t.Run("CreateIsIdempotent", func(t *testing.T) {
		p := newProvider(t)
		id := nodeID(t)
		cleanup(t, p, id)
		first := create(t, p, spec(id))
		second := create(t, p, spec(id))
		if first != second {
			t.Errorf("Create twice gave provider ids %q and %q; want the same", first, second)
		}
		in := waitRunning(t, p, id)
		if n := count(t, p, id); n != 1 {
			t.Errorf("List shows node %s %d times after two Creates; want once", id, n)
		}
		if in.ProviderID != first {
			t.Errorf("List gives provider id %q; Create gave %q", in.ProviderID, first)
		}
	})

	t.Run("ListShowsCreatedNodes", func(t *testing.T) {
		p := newProvider(t)
		a, b := nodeID(t), nodeID(t)
		cleanup(t, p, a, b)
		create(t, p, spec(a))
		create(t, p, spec(b))
		waitRunning(t, p, a)
		waitRunning(t, p, b)
	})

	t.Run("DeleteRemovesAndIsIdempotent", func(t *testing.T) {
		p := newProvider(t)
		id := nodeID(t)
		cleanup(t, p, id)
		create(t, p, spec(id))
		waitRunning(t, p, id)
		ctx := context.Background()
		if err := p.Delete(ctx, id); err != nil {
			t.Fatalf("Delete(%s) = %v", id, err)
		}
		if n := count(t, p, id); n != 0 {
			t.Errorf("List shows node %s after Delete", id)
		}
		if err := p.Delete(ctx, id); err != nil {
			t.Errorf("second Delete(%s) = %v; want nil", id, err)
		}
		if n := count(t, p, id); n != 0 {
			t.Errorf("List shows node %s after a second Delete", id)
		}
	})

	t.Run("DeleteUnknownIsNil", func(t *testing.T) {
		p := newProvider(t)
		if err := p.Delete(context.Background(), nodeID(t)); err != nil {
			t.Errorf("Delete of a node never created = %v; want nil", err)
		}
	})

	t.Run("CreateAfterDelete", func(t *testing.T) {
		p := newProvider(t)
		id := nodeID(t)
		cleanup(t, p, id)
		create(t, p, spec(id))
		waitRunning(t, p, id)
		if err := p.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		create(t, p, spec(id))
		waitRunning(t, p, id)
	})
}

// nodeID is a fresh node id, unique across runs.
func nodeID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "ptest-" + hex.EncodeToString(b)
}

func create(t *testing.T, p provider.Provider, spec provider.NodeSpec) string {
	t.Helper()
	id, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create(%s) = %v", spec.NodeID, err)
	}
	if id == "" {
		t.Fatalf("Create(%s) gave an empty provider id", spec.NodeID)
	}
	return id
}

// cleanup deletes the nodes when the test ends, whatever happened.
func cleanup(t *testing.T, p provider.Provider, ids ...string) {
	t.Cleanup(func() {
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := provider.IgnoreNotFound(p.Delete(ctx, id)); err != nil {
				t.Errorf("cleanup: Delete(%s) = %v", id, err)
			}
			cancel()
		}
	})
}

func list(t *testing.T, p provider.Provider) []provider.Instance {
	t.Helper()
	ins, err := p.List(context.Background())
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	return ins
}

func count(t *testing.T, p provider.Provider, id string) int {
	t.Helper()
	n := 0
	for _, in := range list(t, p) {
		if in.NodeID == id {
			n++
		}
	}
	return n
}

// waitRunning waits for List to show the node as Running.
func waitRunning(t *testing.T, p provider.Provider, id string) provider.Instance {
	t.Helper()
	deadline := time.Now().Add(RunningTimeout)
	for {
		for _, in := range list(t, p) {
			if in.NodeID == id && in.Running {
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Running in List after %s: %+v", id, RunningTimeout, list(t, p))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
