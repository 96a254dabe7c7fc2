package api

import "math"

// IdlePolicy (Cumulus extension, ignored by Azure clients) chooses how
// long idle nodes are kept before idle scale-down removes them. Absent or
// kind Fixed is Azure's behaviour: every idle node is kept
// nodeIdleTimeBeforeScaleDown. Kind Adaptive keeps each idle node as long
// as the cluster's recent demand makes it worth it (docs/simulator.md,
// "Adaptive idle policy"), with nodeIdleTimeBeforeScaleDown as the
// fallback while the policy learns.
type IdlePolicy struct {
	Kind string `json:"kind"`
	// DelayWeight (Adaptive only) is what one second of a job's queue
	// delay is worth in seconds of node time, at least (the policy raises
	// it while jobs find no idle node more often than under the fixed
	// timeout): 0 minimizes cost alone, higher values keep nodes longer.
	// Default DefaultDelayWeight.
	DelayWeight *float64 `json:"delayWeight,omitempty"`
}

// Idle policy kinds and bounds.
const (
	IdlePolicyFixed    = "Fixed"
	IdlePolicyAdaptive = "Adaptive"
	// DefaultDelayWeight is decide.DefaultAdaptive().DelayWeight (api
	// cannot import decide; a controller test keeps the two equal).
	DefaultDelayWeight = 3.25
	MaxDelayWeight     = 1000
)

// AdaptiveIdle reports whether a prepared compute uses the adaptive idle
// policy, and with which delay weight.
func (c *Compute) AdaptiveIdle() (delayWeight float64, ok bool) {
	p := c.Aml().IdlePolicy
	if p == nil || p.Kind != IdlePolicyAdaptive {
		return 0, false
	}
	if p.DelayWeight == nil {
		return DefaultDelayWeight, true
	}
	return *p.DelayWeight, true
}

// prepareIdlePolicy checks an idle policy, spells its kind as the API does
// and fills the default delay weight of an adaptive one.
func prepareIdlePolicy(v *Validation, p *IdlePolicy) {
	if p == nil {
		return
	}
	const target = "properties.properties.idlePolicy"
	kind := oneOf(p.Kind, IdlePolicyFixed, IdlePolicyAdaptive)
	switch {
	case p.Kind == "":
		v.Add(CodeValidationError, target+".kind", "idlePolicy needs a kind: Fixed or Adaptive")
		return
	case kind == "":
		v.Add(CodeValidationError, target+".kind", "idlePolicy kind %q is not one of Fixed, Adaptive", p.Kind)
		return
	}
	p.Kind = kind
	if p.DelayWeight == nil {
		if kind == IdlePolicyAdaptive {
			w := float64(DefaultDelayWeight)
			p.DelayWeight = &w
		}
		return
	}
	w := *p.DelayWeight
	switch {
	case kind != IdlePolicyAdaptive:
		v.Add(CodeValidationError, target+".delayWeight", "delayWeight applies only to kind Adaptive")
	case math.IsNaN(w) || math.IsInf(w, 0):
		v.Add(CodeValidationError, target+".delayWeight", "delayWeight must be a finite number")
	case w < 0:
		v.Add(CodeValidationError, target+".delayWeight", "delayWeight may not be negative, got %g", w)
	case w > MaxDelayWeight:
		v.Add(CodeValidationError, target+".delayWeight", "delayWeight must be at most %d, got %g", MaxDelayWeight, w)
	}
}
