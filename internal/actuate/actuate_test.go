package actuate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
)

// fake records the calls Apply makes; its fields, when set, answer them.
type fake struct {
	calls  []string
	remove func(id string) (bool, error)
	create func(count int) (int, error)
	drain  func(id string) error
	done   Applied // what Record was given
}

var _ Actuator = (*fake)(nil)

func (f *fake) Assign(_ context.Context, as []decide.Assignment) error {
	for _, a := range as {
		f.calls = append(f.calls, "assign "+a.JobID+" "+strings.Join(a.NodeIDs, ","))
	}
	return nil
}

func (f *fake) Preempt(_ context.Context, ps []api.Preemption) error {
	for _, p := range ps {
		f.calls = append(f.calls, "preempt "+p.Job)
	}
	return nil
}

func (f *fake) Drain(_ context.Context, id string) error {
	f.calls = append(f.calls, "drain "+id)
	if f.drain != nil {
		return f.drain(id)
	}
	return nil
}

func (f *fake) Remove(_ context.Context, id string) (bool, error) {
	f.calls = append(f.calls, "remove "+id)
	if f.remove != nil {
		return f.remove(id)
	}
	return true, nil
}

func (f *fake) Create(_ context.Context, count int, images []string) (int, error) {
	f.calls = append(f.calls, fmt.Sprintf("create %d %v", count, images))
	if f.create != nil {
		return f.create(count)
	}
	return count, nil
}

func (f *fake) Record(_ context.Context, p decide.Plan, done Applied) error {
	f.calls = append(f.calls, fmt.Sprintf("record target %d", p.Target))
	f.done = done
	return nil
}

func TestApplyOrder(t *testing.T) {
	p := decide.Plan{
		Assign:  []decide.Assignment{{JobID: "j1", NodeIDs: []string{"n1", "n2"}}, {JobID: "j2", NodeIDs: []string{"n3"}}},
		Preempt: []api.Preemption{{Kind: api.PreemptOverShare, Job: "j0", For: "j3"}},
		Drain:   []string{"n4"},
		Remove:  []string{"n5", "n6"},
		Create:  2, CreateImages: []string{"a", "b"},
		Target: 7,
	}
	f := &fake{}
	done, err := Apply(context.Background(), f, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"assign j1 n1,n2", "assign j2 n3", "preempt j0", "drain n4", "remove n5", "remove n6", "create 2 [a b]", "record target 7"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls\n%q\nwant\n%q", f.calls, want)
	}
	if w := (Applied{Removed: 2, Created: 2}); done != w || f.done != w {
		t.Errorf("applied %+v, recorded %+v; want %+v", done, f.done, w)
	}
}

// A plan with nothing to create does not ask for nodes; one with nothing
// to assign does not assign.
func TestApplySkipsEmptySteps(t *testing.T) {
	f := &fake{}
	if _, err := Apply(context.Background(), f, decide.Plan{Target: 3}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"record target 3"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %q; want %q", f.calls, want)
	}
}

// A step that fails does not stop the others: the errors come back
// together, nodes kept are not counted, and a creation cut short is
// reported apart, not as an error of the plan.
func TestApplyGoesOnAfterFailures(t *testing.T) {
	errDrain, errRemove, errCreate := errors.New("drain failed"), errors.New("remove failed"), errors.New("provider down")
	f := &fake{
		drain: func(string) error { return errDrain },
		remove: func(id string) (bool, error) {
			switch id {
			case "kept":
				return false, nil
			case "bad":
				return false, errRemove
			}
			return true, nil
		},
		create: func(int) (int, error) { return 1, errCreate },
	}
	p := decide.Plan{Drain: []string{"d"}, Remove: []string{"kept", "bad", "gone"}, Create: 3, Target: 4}
	done, err := Apply(context.Background(), f, p)
	if !errors.Is(err, errDrain) || !errors.Is(err, errRemove) || errors.Is(err, errCreate) {
		t.Errorf("error %v; want the drain's and the removal's, not the creation's", err)
	}
	if done.Removed != 1 || done.Created != 1 || done.CreateErr != errCreate {
		t.Errorf("applied %+v; want 1 removed, 1 created, the provider's error", done)
	}
	if last := f.calls[len(f.calls)-1]; last != "record target 4" {
		t.Errorf("last call %q; want the record", last)
	}
}
