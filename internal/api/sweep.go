package api

import (
	"fmt"
	"math"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/sweep"
)

// JobTypeSweep is the jobType of a sweep job: trials of a command
// template over a search space of hyperparameters.
const JobTypeSweep = "Sweep"

// TrialComponent is a sweep's trial template: a command job whose command
// may hold ${{search_space.<name>}}.
type TrialComponent struct {
	Command              string            `json:"command"`
	CodeID               string            `json:"codeId,omitempty"`
	EnvironmentID        string            `json:"environmentId,omitempty"`
	EnvironmentVariables map[string]string `json:"environmentVariables,omitempty"`
	Resources            *JobResources     `json:"resources,omitempty"`
	Distribution         *Distribution     `json:"distribution,omitempty"`
}

// SamplingAlgorithm picks trials' parameters: Grid, Random (with a seed)
// or Bayesian.
type SamplingAlgorithm struct {
	SamplingAlgorithmType string `json:"samplingAlgorithmType"`
	Seed                  *int64 `json:"seed,omitempty"`
	Rule                  string `json:"rule,omitempty"`
}

// Objective is the metric a sweep optimizes and which way.
type Objective struct {
	Goal          string `json:"goal"`
	PrimaryMetric string `json:"primaryMetric"`
}

// EarlyTerminationPolicy stops trials that fall behind: Bandit,
// MedianStopping or TruncationSelection.
type EarlyTerminationPolicy struct {
	PolicyType           string   `json:"policyType"`
	EvaluationInterval   int32    `json:"evaluationInterval,omitempty"`
	DelayEvaluation      int32    `json:"delayEvaluation,omitempty"`
	SlackAmount          *float64 `json:"slackAmount,omitempty"`
	SlackFactor          *float64 `json:"slackFactor,omitempty"`
	TruncationPercentage int32    `json:"truncationPercentage,omitempty"`
}

// SweepStatus is what a sweep has done so far (read-only, a Cumulus
// extension).
type SweepStatus struct {
	TrialsCreated int        `json:"trialsCreated"`
	Seed          uint64     `json:"seed"`
	BestTrial     *BestTrial `json:"bestTrial,omitempty"`
	StoppedEarly  []string   `json:"stoppedEarly,omitempty"` // trials the early termination policy canceled
}

// BestTrial is a sweep's best trial so far by its objective.
type BestTrial struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
	Metric     string         `json:"metric"`
	Value      float64        `json:"value"`
}

// Goals of an objective.
const (
	GoalMaximize = "Maximize"
	GoalMinimize = "Minimize"
)

// IsSweep reports whether j is a sweep job.
func (j *Job) IsSweep() bool { return strings.EqualFold(j.Properties.JobType, JobTypeSweep) }

// SweepSpace is a sweep's parsed search space (checked at submission).
func (j *Job) SweepSpace() (sweep.Space, error) { return sweep.ParseSpace(j.Properties.SearchSpace) }

// MaxTotalTrials is how many trials a sweep runs in all (filled at
// submission).
func (j *Job) MaxTotalTrials() int {
	if l := j.Properties.Limits; l != nil {
		return int(l.MaxTotalTrials)
	}
	return 0
}

// MaxConcurrentTrials is how many trials may run at once.
func (j *Job) MaxConcurrentTrials() int {
	if l := j.Properties.Limits; l != nil && l.MaxConcurrentTrials > 0 {
		return int(l.MaxConcurrentTrials)
	}
	return j.MaxTotalTrials()
}

// TrialName is the name of a sweep's trial i (from 0), as Azure ML names
// its child jobs.
func TrialName(sweepName string, i int) string { return fmt.Sprintf("%s_%d", sweepName, i) }

// Trial is the command job of trial name of sweep j with params: the
// template's command with ${{search_space.x}} bound, the sweep's inputs,
// outputs, compute, experiment and image, and trial_timeout as its limit.
func (j *Job) Trial(name string, params map[string]any) Job {
	sp, tc := j.Properties, j.Properties.Trial
	t := Job{Name: name}
	p := &t.Properties
	p.JobType, p.Command, p.CodeID, p.EnvironmentID = JobTypeCommand, bindSearchSpace(tc.Command, params), tc.CodeID, tc.EnvironmentID
	p.EnvironmentVariables, p.Resources, p.Distribution = cloneMap(tc.EnvironmentVariables), tc.Resources, tc.Distribution
	p.ComputeID, p.ExperimentName, p.Image, p.Priority = sp.ComputeID, sp.ExperimentName, sp.Image, sp.Priority
	p.MinRuntime = sp.MinRuntime
	p.Inputs, p.Outputs, p.QueueSettings, p.Identity = sp.Inputs, WithDefaultOutputs(sp.Outputs, name), sp.QueueSettings, sp.Identity
	p.CodeBlobPath, p.EnvironmentNote = sp.CodeBlobPath, sp.EnvironmentNote
	p.DisplayName, p.ParentJobName, p.Parameters = name, j.Name, params
	if l := sp.Limits; l != nil && l.TrialTimeout != "" {
		p.Limits = &JobLimits{JobLimitsType: JobTypeCommand, Timeout: l.TrialTimeout}
	}
	return t
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// bindSearchSpace replaces ${{search_space.x}} with x's value.
func bindSearchSpace(cmd string, params map[string]any) string {
	var b strings.Builder
	for {
		i := strings.Index(cmd, "${{")
		j := strings.Index(cmd[max(i, 0):], "}}")
		if i < 0 || j < 0 {
			b.WriteString(cmd)
			return b.String()
		}
		ref := strings.TrimSpace(cmd[i+3 : i+j])
		name, ok := strings.CutPrefix(ref, "search_space.")
		v, found := params[name]
		b.WriteString(cmd[:i])
		if ok && found {
			b.WriteString(sweep.Format(v))
		} else {
			b.WriteString(cmd[i : i+j+2])
		}
		cmd = cmd[i+j+2:]
	}
}

// searchSpaceRefs are the names a command binds with ${{search_space.x}}.
func searchSpaceRefs(cmd string) []string {
	var out []string
	for {
		i := strings.Index(cmd, "${{")
		if i < 0 {
			return out
		}
		j := strings.Index(cmd[i:], "}}")
		if j < 0 {
			return out
		}
		if name, ok := strings.CutPrefix(strings.TrimSpace(cmd[i+3:i+j]), "search_space."); ok {
			out = append(out, name)
		}
		cmd = cmd[i+j+2:]
	}
}

// prepareSweep validates a submitted sweep job and fills defaults.
func prepareSweep(j *Job, name string) error {
	var v Validation
	if err := CheckJobName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	p := &j.Properties
	p.JobType, p.Cost, p.Sweep, p.Metrics, p.ParentJobName, p.Parameters = JobTypeSweep, nil, nil, nil, "", nil
	p.CodeBlobPath, p.EnvironmentNote = nil, "" // read-only: resolved at submission
	for k, in := range p.Inputs {
		in.BlobPath = nil
		p.Inputs[k] = in
	}
	for k, out := range p.Outputs {
		out.BlobPath = nil
		p.Outputs[k] = out
	}
	if p.Command != "" || p.CodeID != "" || p.EnvironmentID != "" || p.Resources != nil || p.Distribution != nil {
		v.Add(CodeValidationError, "properties.command", "a sweep job runs its trial: give command, codeId, environmentId, resources and distribution in trial")
	}
	if p.ComputeID == "" {
		v.Add(CodeValidationError, "properties.computeId", "computeId is required: the compute cluster the trials run on")
	}
	if p.Trial == nil || strings.TrimSpace(p.Trial.Command) == "" {
		v.Add(CodeValidationError, "properties.trial.command", "trial.command is required: the command each trial runs, with ${{search_space.<name>}} for its parameters")
	}
	sp, err := sweep.ParseSpace(p.SearchSpace)
	if err != nil {
		v.Add(CodeValidationError, "properties.searchSpace", "%s", err)
	}
	alg := ""
	if a := p.SamplingAlgorithm; a == nil {
		v.Add(CodeValidationError, "properties.samplingAlgorithm", "samplingAlgorithm is required: Grid, Random or Bayesian")
	} else {
		alg = strings.ToLower(a.SamplingAlgorithmType)
		a.SamplingAlgorithmType = map[string]string{sweep.Grid: "Grid", sweep.Random: "Random", sweep.Bayesian: "Bayesian"}[alg]
		if a.SamplingAlgorithmType == "" {
			v.Add(CodeValidationError, "properties.samplingAlgorithm.samplingAlgorithmType", "samplingAlgorithmType %q is not one of Grid, Random, Bayesian", alg)
		} else if err == nil {
			if cerr := sweep.Check(sp, alg); cerr != nil {
				v.Add(CodeValidationError, "properties.searchSpace", "%s", cerr)
			}
		}
		if r := strings.ToLower(a.Rule); r != "" && r != "random" {
			v.Add(CodeValidationError, "properties.samplingAlgorithm.rule", "rule %q is not supported; Cumulus samples with rule Random", a.Rule)
		}
	}
	if p.Trial != nil && err == nil {
		for _, ref := range searchSpaceRefs(p.Trial.Command) {
			if _, ok := sp.Dists[ref]; !ok {
				v.Add(CodeValidationError, "properties.trial.command", "trial.command binds ${{search_space.%s}}, which searchSpace does not define (it has %s)", ref, strings.Join(sp.Names, ", "))
			}
		}
	}
	if o := p.Objective; o == nil || strings.TrimSpace(o.PrimaryMetric) == "" {
		v.Add(CodeValidationError, "properties.objective", "objective.primaryMetric and objective.goal are required: the metric the trials log and whether to Maximize or Minimize it")
	} else {
		switch strings.ToLower(o.Goal) {
		case "maximize":
			o.Goal = GoalMaximize
		case "minimize":
			o.Goal = GoalMinimize
		default:
			v.Add(CodeValidationError, "properties.objective.goal", "objective.goal %q is not Maximize or Minimize", o.Goal)
		}
	}
	if p.Trial != nil && p.Trial.Resources != nil {
		if _, err := ParseShmSize(p.Trial.Resources.ShmSize); err != nil {
			v.Add(CodeValidationError, "properties.trial.resources.shmSize", "%s", err)
		}
	}
	checkSweepLimits(&v, p, sp, alg)
	if e := p.EarlyTermination; e != nil {
		checkEarlyTermination(&v, e)
	}
	prepareJobMinRuntime(&v, p)
	if v.Err() != nil {
		return v.Err()
	}
	// The trials are command jobs: check one as PrepareJob would.
	params := map[string]any{}
	for _, n := range sp.Names {
		params[n] = sp.Dists[n].Decode(0.5)
	}
	t := j.Trial(TrialName(name, 0), params)
	if err := PrepareJob(&t, TrialName(name, 0)); err != nil {
		return fmt.Errorf("trial: %w", err)
	}
	return nil
}

func checkSweepLimits(v *Validation, p *JobProperties, sp sweep.Space, alg string) {
	const target = "properties.limits"
	if p.Limits == nil {
		p.Limits = &JobLimits{}
	}
	l := p.Limits
	l.JobLimitsType = JobTypeSweep
	if l.MaxCost != nil {
		v.Add(CodeValidationError, target+".maxCost", "maxCost applies to command jobs, not sweeps")
	}
	if l.MaxTotalTrials == 0 && alg == sweep.Grid && len(sp.Names) > 0 {
		l.MaxTotalTrials = int32(min(sweep.GridSize(sp), 1000))
	}
	if l.MaxTotalTrials < 1 || l.MaxTotalTrials > 1000 {
		v.Add(CodeValidationError, target+".maxTotalTrials", "maxTotalTrials must be between 1 and 1000, got %d (it is required for random and bayesian sampling)", l.MaxTotalTrials)
	}
	if l.MaxConcurrentTrials == 0 {
		l.MaxConcurrentTrials = l.MaxTotalTrials
	}
	if l.MaxConcurrentTrials < 1 || l.MaxConcurrentTrials > 100 {
		v.Add(CodeValidationError, target+".maxConcurrentTrials", "maxConcurrentTrials must be between 1 and 100, got %d", l.MaxConcurrentTrials)
	}
	for field, d := range map[string]string{"timeout": l.Timeout, "trialTimeout": l.TrialTimeout} {
		if d == "" {
			continue
		}
		dur, err := ParseDuration(d)
		if err != nil || dur < MinJobTimeout || dur > MaxJobTimeout {
			v.Add(CodeValidationError, target+"."+field, "limits.%s must be an ISO 8601 duration between 1 second and 90 days, got %q", field, d)
		}
	}
}

func checkEarlyTermination(v *Validation, e *EarlyTerminationPolicy) {
	const target = "properties.earlyTermination"
	switch strings.ToLower(e.PolicyType) {
	case sweep.Bandit:
		e.PolicyType = "Bandit"
		f, a := e.SlackFactor != nil && *e.SlackFactor != 0, e.SlackAmount != nil && *e.SlackAmount != 0
		if f == a {
			v.Add(CodeValidationError, target, "a Bandit policy takes one of slackFactor and slackAmount")
		}
		for _, x := range []*float64{e.SlackFactor, e.SlackAmount} {
			if x != nil && (*x < 0 || math.IsNaN(*x) || math.IsInf(*x, 0)) {
				v.Add(CodeValidationError, target, "slackFactor and slackAmount must be positive numbers")
			}
		}
	case sweep.MedianStopping:
		e.PolicyType = "MedianStopping"
	case sweep.TruncationSelection:
		e.PolicyType = "TruncationSelection"
		if e.TruncationPercentage < 1 || e.TruncationPercentage > 99 {
			v.Add(CodeValidationError, target+".truncationPercentage", "truncationPercentage must be between 1 and 99, got %d", e.TruncationPercentage)
		}
	default:
		v.Add(CodeValidationError, target+".policyType", "policyType %q is not one of Bandit, MedianStopping, TruncationSelection", e.PolicyType)
	}
	if e.EvaluationInterval < 0 || e.DelayEvaluation < 0 {
		v.Add(CodeValidationError, target, "evaluationInterval and delayEvaluation must not be negative")
	}
	if e.EvaluationInterval == 0 {
		e.EvaluationInterval = 1
	}
}

// SweepPolicy is the early termination policy as sweep.Terminate takes it.
func (e *EarlyTerminationPolicy) SweepPolicy() sweep.Policy {
	p := sweep.Policy{Type: strings.ToLower(e.PolicyType), EvaluationInterval: int(e.EvaluationInterval),
		DelayEvaluation: int(e.DelayEvaluation), TruncationPercentage: int(e.TruncationPercentage)}
	if e.SlackFactor != nil {
		p.SlackFactor = *e.SlackFactor
	}
	if e.SlackAmount != nil {
		p.SlackAmount = *e.SlackAmount
	}
	return p
}
