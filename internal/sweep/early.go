package sweep

import (
	"slices"
	"strings"
)

// Early termination policies, as Azure ML names them (lower case).
const (
	Bandit              = "bandit"
	MedianStopping      = "medianstopping"
	TruncationSelection = "truncationselection"
)

// Policy is an early termination policy. An interval is one value of the
// primary metric a trial logged: the policy looks at a trial when its
// count of values k reaches a multiple of EvaluationInterval after
// DelayEvaluation (k > DelayEvaluation and k % EvaluationInterval == 0).
type Policy struct {
	Type               string
	EvaluationInterval int
	DelayEvaluation    int
	// Bandit: a trial whose value is worse than the best trial's at the
	// same interval by more than SlackFactor (a ratio) or SlackAmount (an
	// absolute difference) stops.
	SlackFactor, SlackAmount float64
	// TruncationSelection: the TruncationPercentage worst trials at each
	// evaluation stop.
	TruncationPercentage int
}

// TrialSeries is the primary metric a trial has logged so far, in order.
type TrialSeries struct {
	Name    string
	Values  []float64
	Running bool
}

// evaluatedAt is the latest interval (1-based) at which the policy looks
// at a trial that has logged n values; 0 for none yet.
func (p Policy) evaluatedAt(n int) int {
	every := max(p.EvaluationInterval, 1)
	for k := n; k > p.DelayEvaluation && k > 0; k-- {
		if k%every == 0 {
			return k
		}
	}
	return 0
}

// Terminate names the running trials the policy stops: each is judged at
// its latest evaluation interval that another trial also reached, against
// every trial (running or not) that reached that interval.
func Terminate(p Policy, maximize bool, trials []TrialSeries) []string {
	better := func(a, b float64) bool { // a is better than b
		if maximize {
			return a > b
		}
		return a < b
	}
	var out []string
	for _, t := range trials {
		if !t.Running {
			continue
		}
		// Judged where another trial can be compared with it: a trial
		// ahead of the others is judged at the furthest interval one of
		// them reached, not left unjudged until they catch up.
		reach := 0
		for _, o := range trials {
			if o.Name != t.Name {
				reach = max(reach, len(o.Values))
			}
		}
		k := p.evaluatedAt(min(len(t.Values), reach))
		if k == 0 {
			continue
		}
		v := t.Values[k-1]
		var others []TrialSeries // those that reached interval k, this one included
		for _, o := range trials {
			if len(o.Values) >= k {
				others = append(others, o)
			}
		}
		if stop(p, better, maximize, t, k, v, others) {
			out = append(out, t.Name)
		}
	}
	return out
}

func stop(p Policy, better func(a, b float64) bool, maximize bool, t TrialSeries, k int, v float64, others []TrialSeries) bool {
	switch strings.ToLower(p.Type) {
	case Bandit:
		best := v
		for _, o := range others {
			if better(o.Values[k-1], best) {
				best = o.Values[k-1]
			}
		}
		var bound float64
		switch {
		case p.SlackFactor > 0 && maximize:
			bound = best / (1 + p.SlackFactor)
		case p.SlackFactor > 0:
			bound = best * (1 + p.SlackFactor)
		case maximize:
			bound = best - p.SlackAmount
		default:
			bound = best + p.SlackAmount
		}
		return better(bound, v)
	case MedianStopping:
		// The trial's best so far against the median of the others'
		// running averages at this interval.
		var avgs []float64
		for _, o := range others {
			if o.Name == t.Name {
				continue
			}
			sum := 0.0
			for _, x := range o.Values[:k] {
				sum += x
			}
			avgs = append(avgs, sum/float64(k))
		}
		if len(avgs) == 0 {
			return false
		}
		bestSoFar := t.Values[0]
		for _, x := range t.Values[:k] {
			if better(x, bestSoFar) {
				bestSoFar = x
			}
		}
		return better(median(avgs), bestSoFar)
	case TruncationSelection:
		n := len(others) * p.TruncationPercentage / 100
		if n == 0 {
			return false
		}
		worse := 0 // trials strictly worse than this one at interval k
		for _, o := range others {
			if better(v, o.Values[k-1]) {
				worse++
			}
		}
		return worse < n
	}
	return false
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
