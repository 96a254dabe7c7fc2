// Package pipeline holds the decisions of pipeline jobs: the order of a
// pipeline's steps (a DAG: a step runs after the steps whose outputs it
// reads) and, given where each step stands, what its controller does next.
// It is pure: no I/O, no clock.
package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

// Step is one step of a pipeline and the steps it reads outputs of.
type Step struct {
	Name  string
	After []string
}

// Order is the steps in an order that runs every step after those it
// depends on (ties by name), or an error that names a step a dependency
// does not exist for, or the steps of a cycle.
func Order(steps []Step) ([]string, error) {
	deps := map[string][]string{}
	for _, s := range steps {
		deps[s.Name] = s.After
	}
	names := make([]string, 0, len(steps))
	for _, s := range steps {
		names = append(names, s.Name)
		for _, d := range s.After {
			if _, ok := deps[d]; !ok {
				return nil, fmt.Errorf("step %s reads the outputs of step %s, which the pipeline does not have", s.Name, d)
			}
		}
	}
	slices.Sort(names)
	const (
		unseen = iota
		visiting
		done
	)
	mark := map[string]int{}
	var out, path []string
	var visit func(n string) error
	visit = func(n string) error {
		switch mark[n] {
		case done:
			return nil
		case visiting:
			i := slices.Index(path, n)
			return fmt.Errorf("steps %s read each other's outputs in a cycle", strings.Join(append(slices.Clone(path[i:]), n), " → "))
		}
		mark[n] = visiting
		path = append(path, n)
		after := slices.Clone(deps[n])
		slices.Sort(after)
		for _, d := range after {
			if err := visit(d); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		mark[n] = done
		out = append(out, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Statuses of a step's job that Next reads (Azure's job statuses).
const (
	Completed = "Completed"
	Failed    = "Failed"
	Canceled  = "Canceled"
)

// State is where one step stands: whether its job exists, and its status.
type State struct {
	Created bool
	Status  string
}

func (s State) ended() bool {
	return s.Status == Completed || s.Status == Failed || s.Status == Canceled
}

// Decision is what the controller does in one pass over a pipeline.
type Decision struct {
	// Start are the steps whose jobs to create now: every step they read
	// from completed.
	Start []string
	// Cancel are the running steps to cancel (the pipeline was canceled,
	// or a step failed and the pipeline does not continue on failure).
	Cancel []string
	// NotRun are the steps that will never run, each with why (a step
	// they read from did not complete).
	NotRun map[string]string
	// End is the pipeline's final status once every step has ended or will
	// never run ("" while some still run), with Reason.
	End, Reason string
}

// Next decides a pass over a pipeline whose steps are order (Order's) with
// their dependencies, given each step's state (a missing one: not
// created). A pipeline being canceled cancels its running steps and starts
// none. A step that fails or is canceled fails the pipeline: without
// continueOnFailure its running steps are canceled and nothing more
// starts; with it, the steps that do not depend on the failed one go on.
// Either way the steps that read from it never run.
func Next(order []Step, states map[string]State, continueOnFailure, canceling bool) Decision {
	d := Decision{NotRun: map[string]string{}}
	var failed []string // steps that ended other than Completed
	for _, s := range order {
		if st := states[s.Name]; st.Created && st.ended() && st.Status != Completed {
			failed = append(failed, s.Name)
		}
	}
	stop := canceling || (len(failed) > 0 && !continueOnFailure)
	blocked := map[string]string{} // step → the step upstream that did not complete
	active := 0
	for _, s := range order {
		st := states[s.Name]
		if st.Created {
			if !st.ended() {
				active++
				if stop {
					d.Cancel = append(d.Cancel, s.Name)
				}
			}
			if st.ended() && st.Status != Completed {
				blocked[s.Name] = s.Name
			}
			continue
		}
		ready := true
		for _, dep := range s.After {
			if why, ok := blocked[dep]; ok {
				blocked[s.Name] = why
				ready = false
				break
			}
			if ds := states[dep]; !ds.Created || ds.Status != Completed {
				ready = false
			}
		}
		switch {
		case blocked[s.Name] != "":
			d.NotRun[s.Name] = fmt.Sprintf("not run: step %s did not complete", blocked[s.Name])
		case stop:
			why := "not run: the pipeline was canceled"
			if !canceling {
				why = fmt.Sprintf("not run: step %s failed and the pipeline does not continue on step failure", failed[0])
			}
			d.NotRun[s.Name] = why
		case ready:
			d.Start = append(d.Start, s.Name)
		}
	}
	if active > 0 || len(d.Start) > 0 {
		return d
	}
	waiting := false // a step not created, not ready, not ruled out: waits for one that runs
	for _, s := range order {
		if !states[s.Name].Created && d.NotRun[s.Name] == "" {
			waiting = true
		}
	}
	if waiting {
		return d
	}
	switch {
	case canceling:
		d.End, d.Reason = Canceled, "canceled by request"
	case len(failed) > 0:
		d.End = Failed
		d.Reason = fmt.Sprintf("step %s %s", failed[0], strings.ToLower(states[failed[0]].Status))
		if len(failed) > 1 {
			d.Reason = fmt.Sprintf("steps %s did not complete", strings.Join(failed, ", "))
		}
	default:
		d.End = Completed
	}
	return d
}
