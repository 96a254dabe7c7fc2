package providertest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// The fake keeps the contract the real providers keep, so what a unit test
// learns with it holds for them.
func TestFakeConformance(t *testing.T) {
	Run(t, func(*testing.T) provider.Provider { return NewFake() },
		func(id string) provider.NodeSpec { return provider.NodeSpec{NodeID: id} })
}

// The fake records every call, fails the next Create once when told to,
// runs out of room after AllowedCreateCalls nodes, and Reset starts over.
func TestFakeRecordsAndFails(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	boom := errors.New("boom")
	f.NextCreateErr = boom
	if _, err := f.Create(ctx, provider.NodeSpec{NodeID: "a"}); err != boom {
		t.Fatalf("Create with NextCreateErr set = %v; want it", err)
	}
	if _, err := f.Create(ctx, provider.NodeSpec{NodeID: "a"}); err != nil {
		t.Fatalf("the Create after = %v; want the error used up", err)
	}
	f.AllowedCreateCalls = 2
	if _, err := f.Create(ctx, provider.NodeSpec{NodeID: "b"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Create(ctx, provider.NodeSpec{NodeID: "c"})
	if !provider.IsInsufficientCapacity(err) || !errors.Is(err, ErrCreateCallsExhausted) {
		t.Fatalf("a third node with room for two = %v; want an insufficient-capacity error", err)
	}
	if _, err := f.Create(ctx, provider.NodeSpec{NodeID: "a"}); err != nil {
		t.Errorf("Create of a node that exists, at the limit = %v; want its id (idempotent)", err)
	}
	if err := f.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var calls []string
	f.Locked(func() {
		for _, s := range f.CreateCalls {
			calls = append(calls, s.NodeID)
		}
	})
	if want := []string{"a", "a", "b", "c", "a"}; !slices.Equal(calls, want) {
		t.Errorf("CreateCalls %v; want %v", calls, want)
	}
	if want := []string{"a", "b"}; !slices.Equal(f.Created, want) {
		t.Errorf("Created %v; want %v", f.Created, want)
	}
	if got := f.Nodes(); !slices.Equal(got, []string{"b"}) || !slices.Equal(f.DeleteCalls, []string{"a"}) {
		t.Errorf("nodes %v, deletes %v; want [b] and [a]", got, f.DeleteCalls)
	}
	f.Reset()
	if len(f.CreateCalls)+len(f.Created)+len(f.DeleteCalls)+len(f.Nodes()) != 0 || f.NextCreateErr != nil {
		t.Errorf("after Reset: %+v", f)
	}
	if _, err := f.Create(ctx, provider.NodeSpec{NodeID: "c"}); err != nil {
		t.Errorf("Create after Reset = %v; want no limit", err)
	}
}
