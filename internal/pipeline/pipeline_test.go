package pipeline

import (
	"slices"
	"strings"
	"testing"
)

func TestOrderRunsStepsAfterTheirInputs(t *testing.T) {
	got, err := Order([]Step{{Name: "score", After: []string{"prep"}}, {Name: "report", After: []string{"score", "prep"}}, {Name: "prep"}, {Name: "audit"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"audit", "prep", "score", "report"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestOrderRefusesCyclesAndUnknownSteps(t *testing.T) {
	_, err := Order([]Step{{Name: "a", After: []string{"b"}}, {Name: "b", After: []string{"c"}}, {Name: "c", After: []string{"a"}}})
	if err == nil || !strings.Contains(err.Error(), "a → b → c → a") {
		t.Fatalf("cycle: %v", err)
	}
	_, err = Order([]Step{{Name: "a", After: []string{"missing"}}})
	if err == nil || !strings.Contains(err.Error(), "step missing") {
		t.Fatalf("unknown step: %v", err)
	}
}

var chain = []Step{{Name: "prep"}, {Name: "side"}, {Name: "score", After: []string{"prep"}}, {Name: "report", After: []string{"score"}}}

func TestNextStartsStepsWhenTheirInputsExist(t *testing.T) {
	d := Next(chain, map[string]State{}, false, false)
	if !slices.Equal(d.Start, []string{"prep", "side"}) || d.End != "" {
		t.Fatalf("first pass: %+v", d)
	}
	d = Next(chain, map[string]State{"prep": {true, "Running"}, "side": {true, Completed}}, false, false)
	if len(d.Start) != 0 || d.End != "" {
		t.Fatalf("score waits for prep: %+v", d)
	}
	d = Next(chain, map[string]State{"prep": {true, Completed}, "side": {true, Completed}}, false, false)
	if !slices.Equal(d.Start, []string{"score"}) {
		t.Fatalf("score starts once prep completed: %+v", d)
	}
	all := map[string]State{"prep": {true, Completed}, "side": {true, Completed}, "score": {true, Completed}, "report": {true, Completed}}
	if d := Next(chain, all, false, false); d.End != Completed || len(d.Start) != 0 {
		t.Fatalf("all done: %+v", d)
	}
}

func TestNextFailedStepStopsThePipeline(t *testing.T) {
	st := map[string]State{"prep": {true, Failed}, "side": {true, "Running"}}
	d := Next(chain, st, false, false)
	if !slices.Equal(d.Cancel, []string{"side"}) || len(d.Start) != 0 || d.End != "" {
		t.Fatalf("a failed step cancels the running ones: %+v", d)
	}
	if !strings.Contains(d.NotRun["score"], "step prep did not complete") || !strings.Contains(d.NotRun["report"], "step prep") {
		t.Fatalf("dependents never run: %+v", d.NotRun)
	}
	st["side"] = State{true, Canceled}
	d = Next(chain, st, false, false)
	if d.End != Failed || !strings.Contains(d.Reason, "prep") {
		t.Fatalf("then the pipeline fails: %+v", d)
	}
}

func TestNextContinueOnStepFailureRunsTheIndependentSteps(t *testing.T) {
	steps := append(slices.Clone(chain), Step{Name: "late", After: []string{"side"}})
	st := map[string]State{"prep": {true, Failed}, "side": {true, Completed}}
	d := Next(steps, st, true, false)
	if !slices.Equal(d.Start, []string{"late"}) || len(d.Cancel) != 0 || d.NotRun["score"] == "" || d.NotRun["report"] == "" {
		t.Fatalf("continue on failure: %+v", d)
	}
	st["late"] = State{true, Completed}
	if d := Next(steps, st, true, false); d.End != Failed {
		t.Fatalf("the pipeline still fails: %+v", d)
	}
}

func TestNextCancelStopsEverything(t *testing.T) {
	st := map[string]State{"prep": {true, "Running"}, "side": {true, Completed}}
	d := Next(chain, st, false, true)
	if !slices.Equal(d.Cancel, []string{"prep"}) || len(d.Start) != 0 || d.End != "" {
		t.Fatalf("cancel: %+v", d)
	}
	st["prep"] = State{true, Canceled}
	if d := Next(chain, st, false, true); d.End != Canceled {
		t.Fatalf("then the pipeline is canceled: %+v", d)
	}
}
