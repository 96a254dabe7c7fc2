package sweep

import (
	"reflect"
	"testing"
)

func TestBandit(t *testing.T) {
	trials := []TrialSeries{
		{Name: "best", Values: []float64{0.5, 0.8, 0.9}},
		{Name: "close", Values: []float64{0.5, 0.75, 0.85}, Running: true},
		{Name: "behind", Values: []float64{0.4, 0.5, 0.6}, Running: true},
		{Name: "young", Values: []float64{0.1}, Running: true}, // not yet past the delay
	}
	p := Policy{Type: Bandit, SlackFactor: 0.1, EvaluationInterval: 1, DelayEvaluation: 1}
	if got := Terminate(p, true, trials); !reflect.DeepEqual(got, []string{"behind"}) {
		t.Errorf("bandit slack_factor 0.1, maximize: %v", got)
	}
	p = Policy{Type: Bandit, SlackAmount: 0.02, EvaluationInterval: 1}
	if got := Terminate(p, true, trials); !reflect.DeepEqual(got, []string{"close", "behind", "young"}) {
		t.Errorf("bandit slack_amount 0.02: %v", got)
	}
	// Minimizing a loss: the same numbers, the other way round.
	loss := []TrialSeries{{Name: "a", Values: []float64{1.0}, Running: true}, {Name: "b", Values: []float64{2.0}, Running: true}}
	if got := Terminate(Policy{Type: Bandit, SlackFactor: 0.5}, false, loss); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("bandit minimize: %v", got)
	}
	// Evaluated every 2 intervals only: at 3 values, interval 2 counts.
	p = Policy{Type: Bandit, SlackAmount: 0.02, EvaluationInterval: 2}
	if got := Terminate(p, true, trials[:3]); !reflect.DeepEqual(got, []string{"close", "behind"}) {
		t.Errorf("every 2: %v", got)
	}
}

// TestAheadIsJudged: a trial that logged more values than the others is
// judged at the furthest interval another reached.
func TestAheadIsJudged(t *testing.T) {
	trials := []TrialSeries{
		{Name: "fast-laggard", Values: []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, Running: true},
		{Name: "slow-leader", Values: []float64{0.9, 0.9}, Running: true},
	}
	if got := Terminate(Policy{Type: Bandit, SlackFactor: 0.1, EvaluationInterval: 1}, true, trials); !reflect.DeepEqual(got, []string{"fast-laggard"}) {
		t.Errorf("bandit: %v", got)
	}
	if got := Terminate(Policy{Type: Bandit, SlackFactor: 0.1}, true, trials[:1]); got != nil {
		t.Errorf("a trial alone: %v", got)
	}
}

func TestMedianStopping(t *testing.T) {
	trials := []TrialSeries{
		{Name: "a", Values: []float64{0.5, 0.6}},
		{Name: "b", Values: []float64{0.6, 0.7}},
		{Name: "c", Values: []float64{0.2, 0.3}, Running: true},
		{Name: "d", Values: []float64{0.6, 0.8}, Running: true},
	}
	if got := Terminate(Policy{Type: MedianStopping, EvaluationInterval: 1}, true, trials); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("median stopping: %v", got)
	}
}

func TestTruncationSelection(t *testing.T) {
	var trials []TrialSeries
	for i, v := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0} {
		trials = append(trials, TrialSeries{Name: string(rune('a' + i)), Values: []float64{v}, Running: true})
	}
	got := Terminate(Policy{Type: TruncationSelection, TruncationPercentage: 20, EvaluationInterval: 1}, true, trials)
	if !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("truncation 20%%: %v", got)
	}
}
