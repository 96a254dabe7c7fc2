package cli

import (
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// SweepView is what `job show` adds for a sweep job, in the az ml sweep
// YAML's names (its limits go into the job's limits), and for a trial.
type SweepView struct {
	Trial             *trialView     `json:"trial,omitempty"`
	SearchSpace       map[string]any `json:"search_space,omitempty"`
	SamplingAlgorithm map[string]any `json:"sampling_algorithm,omitempty"`
	Objective         *ObjectiveSpec `json:"objective,omitempty"`
	EarlyTermination  map[string]any `json:"early_termination,omitempty"`
	// Cumulus: the sweep's progress and best trial; a trial's sweep and
	// parameters.
	Sweep         *api.SweepStatus `json:"sweep,omitempty"`
	ParentJobName string           `json:"parent_job_name,omitempty"`
	Parameters    map[string]any   `json:"parameters,omitempty"`
}

type trialView struct {
	Command              string            `json:"command"`
	Code                 string            `json:"code,omitempty"`
	Environment          string            `json:"environment,omitempty"`
	EnvironmentImage     string            `json:"environment_image,omitempty"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
}

// sweepViewOf is the sweep's (or trial's) part of a job view; nil for
// other jobs. A sweep's limits are added to limits.
func sweepViewOf(j api.Job, limits *jobLimitsView) *SweepView {
	p := j.Properties
	if !j.IsSweep() {
		if p.ParentJobName == "" {
			return nil
		}
		return &SweepView{ParentJobName: p.ParentJobName, Parameters: p.Parameters}
	}
	v := &SweepView{Sweep: p.Sweep}
	if t := p.Trial; t != nil {
		v.Trial = &trialView{Command: t.Command, Environment: t.EnvironmentID, EnvironmentVariables: t.EnvironmentVariables}
		if img, ok := strings.CutPrefix(t.EnvironmentID, "image:"); ok {
			v.Trial.Environment, v.Trial.EnvironmentImage = "", img
		}
		if t.CodeID != "" {
			v.Trial.Code = "azureml:" + t.CodeID
		}
	}
	if len(p.SearchSpace) > 0 {
		v.SearchSpace = map[string]any{}
		for name, d := range p.SearchSpace {
			v.SearchSpace[name] = distView(d)
		}
	}
	if a := p.SamplingAlgorithm; a != nil {
		v.SamplingAlgorithm = map[string]any{"type": strings.ToLower(a.SamplingAlgorithmType)}
		if a.Seed != nil {
			v.SamplingAlgorithm["seed"] = *a.Seed
		}
	}
	if o := p.Objective; o != nil {
		v.Objective = &ObjectiveSpec{Goal: strings.ToLower(o.Goal), PrimaryMetric: o.PrimaryMetric}
	}
	if e := p.EarlyTermination; e != nil {
		et := map[string]any{"type": map[string]string{"Bandit": "bandit", "MedianStopping": "median_stopping",
			"TruncationSelection": "truncation_selection"}[e.PolicyType], "evaluation_interval": e.EvaluationInterval, "delay_evaluation": e.DelayEvaluation}
		if e.SlackFactor != nil {
			et["slack_factor"] = *e.SlackFactor
		}
		if e.SlackAmount != nil {
			et["slack_amount"] = *e.SlackAmount
		}
		if e.TruncationPercentage != 0 {
			et["truncation_percentage"] = e.TruncationPercentage
		}
		v.EarlyTermination = et
	}
	if l := p.Limits; l != nil && limits != nil {
		limits.MaxTotalTrials, limits.MaxConcurrentTrials = l.MaxTotalTrials, l.MaxConcurrentTrials
		if d, err := api.ParseDuration(l.TrialTimeout); err == nil && l.TrialTimeout != "" {
			limits.TrialTimeout = int64(d / time.Second)
		}
	}
	return v
}

// distView is a search space distribution in the YAML's form: the REST
// list ["uniform", [0.01, 0.1]] becomes {type: uniform, min_value: 0.01, max_value: 0.1}.
func distView(d any) any {
	arr, ok := d.([]any)
	if !ok || len(arr) != 2 {
		return d
	}
	typ, _ := arr[0].(string)
	args, _ := arr[1].([]any)
	if typ == "choice" {
		if len(args) == 1 {
			if vals, ok := args[0].([]any); ok {
				return map[string]any{"type": "choice", "values": vals}
			}
		}
		return map[string]any{"type": "choice", "values": args}
	}
	keys, ok := distArgs[typ]
	if !ok || len(keys) != len(args) {
		return d
	}
	out := map[string]any{"type": typ}
	for i, k := range keys {
		out[k] = args[i]
	}
	return out
}
