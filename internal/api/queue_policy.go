package api

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// QueuePolicy (Cumulus extension, ignored by Azure clients) chooses the
// order in which a compute's queued jobs start, and whether running jobs
// are preempted for waiting ones. Absent, or kind Fifo without
// preemption, is Azure's queue: by priority, then first come, across
// everyone who submits to the compute.
//
// Kind FairShare groups the jobs (by the principal that submitted them,
// or by the value of one of their tags) and starts next the job of the
// group furthest below its weighted share of the cluster, counting the
// nodes each group holds now and the node time (GPU time on GPU sizes) it
// held recently, decayed with a half-life.
type QueuePolicy struct {
	Kind string `json:"kind"`
	// FairShareBy (FairShare): "principal" (default) or "tag:KEY".
	FairShareBy string `json:"fairShareBy,omitempty"`
	// Weights (FairShare) of the groups by name; a group not named
	// weighs 1.
	Weights map[string]float64 `json:"weights,omitempty"`
	// UsageHalfLife (FairShare): how fast past usage is forgotten.
	// ISO-8601, default PT24H.
	UsageHalfLife string `json:"usageHalfLife,omitempty"`
	// Preemption: None (default), LowerPriority (a waiting job stops
	// running jobs of lower priority) or OverShare (FairShare: a waiting
	// job of a group under its share stops jobs of the groups furthest
	// over theirs).
	Preemption string `json:"preemption,omitempty"`
	// MinRuntime (with preemption): a job runs at least this long in each
	// attempt before it may be preempted (a job may ask for its own,
	// MinRuntime of the job). ISO-8601, default PT10M.
	MinRuntime string `json:"minRuntime,omitempty"`
}

// Queue policy kinds, preemption modes, groupings and bounds.
const (
	QueuePolicyFifo      = "Fifo"
	QueuePolicyFairShare = "FairShare"

	PreemptNone          = "None"
	PreemptLowerPriority = "LowerPriority"
	PreemptOverShare     = "OverShare"

	FairShareByPrincipal = "principal"
	FairShareByTagPrefix = "tag:"

	DefaultUsageHalfLife = 24 * time.Hour
	MinUsageHalfLife     = time.Minute
	MaxUsageHalfLife     = 365 * 24 * time.Hour
	DefaultMinRuntime    = 10 * time.Minute
	MinMinRuntime        = time.Second
	MaxMinRuntime        = 7 * 24 * time.Hour
	// MaxJobMinRuntime bounds what a job may ask for itself: a longer
	// protection from preemption is its compute's to give.
	MaxJobMinRuntime = time.Hour
	MaxShareWeight   = 1000
	maxShareWeights  = 1000
	maxGroupName     = 256
)

// FairShareNoGroup names, when jobs are grouped by a tag, the group of the
// jobs without it.
const FairShareNoGroup = ""

// Queue is a compute's queue policy as the decisions read it: defaults
// filled, durations parsed. The zero value is Fifo without preemption.
type Queue struct {
	FairShare bool
	// By is "principal" or "tag:KEY" (FairShare).
	By         string
	Weights    map[string]float64
	HalfLife   time.Duration
	Preemption string // PreemptNone, PreemptLowerPriority or PreemptOverShare
	MinRuntime time.Duration
}

// Queue is the compute's queue policy, defaults filled (a stored compute's
// policy was validated when it was stored).
func (c *Compute) Queue() Queue {
	p := c.Aml().QueuePolicy
	q := Queue{Preemption: PreemptNone}
	if p == nil {
		return q
	}
	q.FairShare = strings.EqualFold(p.Kind, QueuePolicyFairShare)
	if q.FairShare {
		q.By, q.Weights, q.HalfLife = FairShareByPrincipal, p.Weights, DefaultUsageHalfLife
		if p.FairShareBy != "" {
			q.By = p.FairShareBy
		}
		if d, err := ParseDuration(p.UsageHalfLife); err == nil && d > 0 {
			q.HalfLife = d
		}
	}
	if p.Preemption != "" {
		q.Preemption = p.Preemption
	}
	if q.Preemption != PreemptNone {
		q.MinRuntime = DefaultMinRuntime
		if d, err := ParseDuration(p.MinRuntime); err == nil {
			q.MinRuntime = d
		}
	}
	return q
}

// Weight is group g's weight: its own, or 1.
func (q Queue) Weight(g string) float64 {
	if w, ok := q.Weights[g]; ok {
		return w
	}
	return 1
}

// Tag is the tag that groups the jobs (By "tag:KEY"), "" when they are
// grouped by principal.
func (q Queue) Tag() string {
	if k, ok := strings.CutPrefix(q.By, FairShareByTagPrefix); ok {
		return k
	}
	return ""
}

// GroupOf is the fair-share group of job j under the policy: the value of
// the grouping tag (FairShareNoGroup when the job has none), or the
// principal that submitted it. "" when the policy is not FairShare.
func (q Queue) GroupOf(j *Job) string {
	if !q.FairShare {
		return ""
	}
	if k := q.Tag(); k != "" {
		return j.Properties.Tags[k]
	}
	if j.SystemData != nil {
		return j.SystemData.CreatedBy
	}
	return ""
}

// GroupName is how a group is shown: its name, or what stands for the
// jobs without the grouping tag.
func (q Queue) GroupName(g string) string {
	if g == FairShareNoGroup {
		if k := q.Tag(); k != "" {
			return "(no " + k + " tag)"
		}
		return "(unknown principal)"
	}
	return g
}

// PrepareQueuePolicy checks a queue policy and fills its defaults as a PUT
// does, for a client that compares what it sends with what is stored.
func PrepareQueuePolicy(p *QueuePolicy) error {
	var v Validation
	prepareQueuePolicy(&v, p)
	return v.Err()
}

// prepareQueuePolicy checks a queue policy, spells its kind and modes as
// the API does and fills its defaults.
func prepareQueuePolicy(v *Validation, p *QueuePolicy) {
	if p == nil {
		return
	}
	const target = "properties.properties.queuePolicy"
	kind := oneOf(p.Kind, QueuePolicyFifo, QueuePolicyFairShare)
	switch {
	case p.Kind == "":
		v.Add(CodeValidationError, target+".kind", "queuePolicy needs a kind: Fifo or FairShare")
		return
	case kind == "":
		v.Add(CodeValidationError, target+".kind", "queuePolicy kind %q is not one of Fifo, FairShare", p.Kind)
		return
	}
	p.Kind = kind
	fair := kind == QueuePolicyFairShare
	if !fair {
		for field, set := range map[string]bool{"fairShareBy": p.FairShareBy != "", "weights": p.Weights != nil, "usageHalfLife": p.UsageHalfLife != ""} {
			if set {
				v.Add(CodeValidationError, target+"."+field, "%s applies only to kind FairShare", field)
			}
		}
	}
	if fair {
		prepareFairShare(v, p)
	}
	if p.Preemption == "" {
		p.Preemption = PreemptNone
	}
	mode := oneOf(p.Preemption, PreemptNone, PreemptLowerPriority, PreemptOverShare)
	switch {
	case mode == "":
		v.Add(CodeValidationError, target+".preemption", "preemption %q is not one of None, LowerPriority, OverShare", p.Preemption)
		return
	case mode == PreemptOverShare && !fair:
		v.Add(CodeValidationError, target+".preemption", "preemption OverShare needs kind FairShare (a share is what a FIFO queue does not have)")
	}
	p.Preemption = mode
	if mode == PreemptNone {
		if p.MinRuntime != "" {
			v.Add(CodeValidationError, target+".minRuntime", "minRuntime applies only with preemption LowerPriority or OverShare")
		}
		return
	}
	if p.MinRuntime == "" {
		p.MinRuntime = FormatDuration(DefaultMinRuntime)
	}
	checkDuration(v, target+".minRuntime", "minRuntime", p.MinRuntime, MinMinRuntime, MaxMinRuntime)
}

func prepareFairShare(v *Validation, p *QueuePolicy) {
	const target = "properties.properties.queuePolicy"
	if p.FairShareBy == "" {
		p.FairShareBy = FairShareByPrincipal
	}
	if strings.EqualFold(p.FairShareBy, FairShareByPrincipal) {
		p.FairShareBy = FairShareByPrincipal
	} else if k, ok := strings.CutPrefix(p.FairShareBy, FairShareByTagPrefix); !ok || k == "" || len(k) > maxTagKeyLen || strings.TrimSpace(k) != k {
		v.Add(CodeValidationError, target+".fairShareBy", "fairShareBy %q is not principal or tag:KEY (for example tag:team)", p.FairShareBy)
	}
	if len(p.Weights) > maxShareWeights {
		v.Add(CodeValidationError, target+".weights", "at most %d weights are allowed, got %d", maxShareWeights, len(p.Weights))
	}
	names := make([]string, 0, len(p.Weights))
	for g := range p.Weights {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		w := p.Weights[g]
		switch {
		case g == "" || len(g) > maxGroupName:
			v.Add(CodeValidationError, target+".weights", "a group's name must be 1 to %d characters, got %q", maxGroupName, g)
		case math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 || w > MaxShareWeight:
			v.Add(CodeValidationError, target+".weights."+g, "the weight of group %q must be more than 0 and at most %d, got %g", g, MaxShareWeight, w)
		}
	}
	if p.UsageHalfLife == "" {
		p.UsageHalfLife = FormatDuration(DefaultUsageHalfLife)
	}
	checkDuration(v, target+".usageHalfLife", "usageHalfLife", p.UsageHalfLife, MinUsageHalfLife, MaxUsageHalfLife)
}

// checkDuration refuses an ISO-8601 duration that does not parse or lies
// outside [lo, hi].
func checkDuration(v *Validation, target, field, s string, lo, hi time.Duration) {
	d, err := ParseDuration(s)
	switch {
	case err != nil:
		v.Add(CodeValidationError, target, "%s: %s", field, err)
	case d < lo || d > hi:
		v.Add(CodeValidationError, target, "%s must be between %s and %s, got %s", field, words(lo), words(hi), s)
	}
}

// words says a duration the way people do: 10 minutes, 24 hours, 7 days.
func words(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d %s", d/(24*time.Hour), plural(int(d/(24*time.Hour)), "day"))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d %s", d/time.Hour, plural(int(d/time.Hour), "hour"))
	case d%time.Minute == 0:
		return fmt.Sprintf("%d %s", d/time.Minute, plural(int(d/time.Minute), "minute"))
	case d%time.Second == 0:
		return fmt.Sprintf("%d %s", d/time.Second, plural(int(d/time.Second), "second"))
	}
	return d.String()
}

// prepareJobMinRuntime checks a job's own minimum runtime.
func prepareJobMinRuntime(v *Validation, p *JobProperties) {
	if p.MinRuntime == "" {
		return
	}
	checkDuration(v, "properties.minRuntime", "minRuntime", p.MinRuntime, MinMinRuntime, MaxJobMinRuntime)
}

// JobMinRuntime is job j's own minimum runtime, 0 when it has none (its
// compute's applies).
func (j *Job) JobMinRuntime() time.Duration {
	d, err := ParseDuration(j.Properties.MinRuntime)
	if err != nil {
		return 0
	}
	return d
}
