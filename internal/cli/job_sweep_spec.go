package cli

import (
	"context"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// SweepSpec is what the `az ml` sweep-job YAML adds to a job.
type SweepSpec struct {
	Trial             *TrialSpec                `yaml:"trial,omitempty"`
	SearchSpace       map[string]map[string]any `yaml:"search_space,omitempty"`
	SamplingAlgorithm yaml.Node                 `yaml:"sampling_algorithm,omitempty"`
	Objective         *ObjectiveSpec            `yaml:"objective,omitempty"`
	EarlyTermination  *EarlyTerminationSpec     `yaml:"early_termination,omitempty"`
}

// TrialSpec is a sweep's trial: a command job template.
type TrialSpec struct {
	Command              string            `yaml:"command"`
	Code                 string            `yaml:"code,omitempty"`
	Environment          yaml.Node         `yaml:"environment,omitempty"`
	EnvironmentVariables map[string]string `yaml:"environment_variables,omitempty"`
	Resources            *JobResourcesSpec `yaml:"resources,omitempty"`
	Distribution         *DistributionSpec `yaml:"distribution,omitempty"`
}

// ObjectiveSpec is objective: in the YAML.
type ObjectiveSpec struct {
	Goal          string `yaml:"goal" json:"goal"`
	PrimaryMetric string `yaml:"primary_metric" json:"primary_metric"`
}

// EarlyTerminationSpec is early_termination: in the YAML.
type EarlyTerminationSpec struct {
	Type                 string   `yaml:"type"`
	EvaluationInterval   int32    `yaml:"evaluation_interval,omitempty"`
	DelayEvaluation      int32    `yaml:"delay_evaluation,omitempty"`
	SlackFactor          *float64 `yaml:"slack_factor,omitempty"`
	SlackAmount          *float64 `yaml:"slack_amount,omitempty"`
	TruncationPercentage int32    `yaml:"truncation_percentage,omitempty"`
	ExcludeFinishedJobs  bool     `yaml:"exclude_finished_jobs,omitempty"`
}

// distArgs are the YAML keys of each distribution's arguments, in the
// order of the REST list (azure-ai-ml's _to_rest_object).
var distArgs = map[string][]string{
	"randint": {"upper"}, "uniform": {"min_value", "max_value"}, "loguniform": {"min_value", "max_value"},
	"quniform": {"min_value", "max_value", "q"}, "qloguniform": {"min_value", "max_value", "q"},
	"normal": {"mu", "sigma"}, "lognormal": {"mu", "sigma"}, "qnormal": {"mu", "sigma", "q"}, "qlognormal": {"mu", "sigma", "q"},
}

// sweepToARM converts a sweep-job YAML to the REST SweepJob, as the
// azure-ai-ml SDK does; the trial is converted as a command job is (code
// uploaded, environment resolved), then moved under trial.
func (s JobSpec) sweepToARM(ctx context.Context, c *client.Client, baseDir string, needCompute bool) (api.Job, error) {
	if s.Trial == nil {
		return api.Job{}, fmt.Errorf("a sweep job needs trial: (its command, code and environment)")
	}
	if s.Command != "" || s.Code != "" || s.Environment.Kind != 0 {
		return api.Job{}, fmt.Errorf("a sweep job takes command, code and environment under trial:, not at the top")
	}
	cmd := s
	cmd.Type, cmd.SweepSpec, cmd.Limits = "command", SweepSpec{}, nil
	t := s.Trial
	cmd.Command, cmd.Code, cmd.Environment, cmd.Distribution = t.Command, t.Code, t.Environment, t.Distribution
	cmd.EnvironmentVariables, cmd.Resources = t.EnvironmentVariables, t.Resources
	j, err := cmd.commandToARM(ctx, c, baseDir, needCompute)
	if err != nil {
		return j, err
	}
	p := &j.Properties
	p.JobType = api.JobTypeSweep
	p.Trial = &api.TrialComponent{Command: p.Command, CodeID: p.CodeID, EnvironmentID: p.EnvironmentID,
		EnvironmentVariables: p.EnvironmentVariables, Resources: p.Resources, Distribution: p.Distribution}
	p.Command, p.CodeID, p.EnvironmentID, p.EnvironmentVariables, p.Resources, p.Distribution = "", "", "", nil, nil, nil
	if p.SearchSpace, err = searchSpaceOf(s.SearchSpace); err != nil {
		return j, err
	}
	if p.SamplingAlgorithm, err = samplingOf(s.SamplingAlgorithm); err != nil {
		return j, err
	}
	if o := s.Objective; o != nil {
		p.Objective = &api.Objective{Goal: o.Goal, PrimaryMetric: o.PrimaryMetric}
	}
	if e := s.EarlyTermination; e != nil {
		if e.ExcludeFinishedJobs {
			return j, fmt.Errorf("early_termination.exclude_finished_jobs is not supported")
		}
		p.EarlyTermination = &api.EarlyTerminationPolicy{PolicyType: strings.ReplaceAll(e.Type, "_", ""), EvaluationInterval: e.EvaluationInterval,
			DelayEvaluation: e.DelayEvaluation, SlackFactor: e.SlackFactor, SlackAmount: e.SlackAmount, TruncationPercentage: e.TruncationPercentage}
	}
	if l := s.Limits; l != nil {
		if l.MaxCost != 0 {
			return j, fmt.Errorf("limits.max_cost applies to command jobs, not sweeps")
		}
		p.Limits = &api.JobLimits{JobLimitsType: api.JobTypeSweep, MaxTotalTrials: l.MaxTotalTrials, MaxConcurrentTrials: l.MaxConcurrentTrials}
		for _, d := range []struct {
			secs int64
			to   *string
			name string
		}{{l.Timeout, &p.Limits.Timeout, "timeout"}, {l.TrialTimeout, &p.Limits.TrialTimeout, "trial_timeout"}} {
			if d.secs < 0 {
				return j, fmt.Errorf("limits.%s must be a positive number of seconds", d.name)
			}
			if d.secs > 0 {
				*d.to = fmt.Sprintf("PT%dS", d.secs)
			}
		}
	}
	return j, nil
}

// searchSpaceOf converts search_space: to the REST form
// ({"lr": ["uniform", [0.01, 0.1]], "bs": ["choice", [[16, 32]]]}).
func searchSpaceOf(ss map[string]map[string]any) (map[string]any, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("a sweep job needs search_space: (a distribution per parameter)")
	}
	out := map[string]any{}
	for name, d := range ss {
		typ, _ := d["type"].(string)
		typ = strings.ToLower(typ)
		if typ == "choice" {
			vals, ok := d["values"].([]any)
			if !ok {
				return nil, fmt.Errorf("search_space.%s: a choice needs values: [ … ]", name)
			}
			out[name] = []any{"choice", []any{vals}}
			continue
		}
		keys, ok := distArgs[typ]
		if !ok {
			return nil, fmt.Errorf("search_space.%s: type %q is not one of choice, randint, uniform, quniform, loguniform, qloguniform, normal, qnormal, lognormal, qlognormal", name, d["type"])
		}
		args := make([]any, len(keys))
		for i, k := range keys {
			v, ok := d[k]
			if !ok {
				return nil, fmt.Errorf("search_space.%s: %s needs %s", name, typ, strings.Join(keys, ", "))
			}
			args[i] = v
		}
		out[name] = []any{typ, args}
	}
	return out, nil
}

// samplingOf reads sampling_algorithm: a name (random, grid, bayesian) or
// {type, seed, rule}.
func samplingOf(n yaml.Node) (*api.SamplingAlgorithm, error) {
	switch n.Kind {
	case 0:
		return nil, fmt.Errorf("a sweep job needs sampling_algorithm: random, grid or bayesian")
	case yaml.ScalarNode:
		return &api.SamplingAlgorithm{SamplingAlgorithmType: n.Value}, nil
	}
	var a struct {
		Type string `yaml:"type"`
		Seed *int64 `yaml:"seed"`
		Rule string `yaml:"rule"`
	}
	if err := n.Decode(&a); err != nil {
		return nil, fmt.Errorf("sampling_algorithm: %w", err)
	}
	return &api.SamplingAlgorithm{SamplingAlgorithmType: a.Type, Seed: a.Seed, Rule: a.Rule}, nil
}
