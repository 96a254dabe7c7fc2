package cli

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// PipelineSpec is what the `az ml` pipeline-job YAML adds to a job: its
// settings and its steps (jobs).
type PipelineSpec struct {
	Settings *PipelineSettingsSpec `yaml:"settings,omitempty"`
	Jobs     map[string]*StepSpec  `yaml:"jobs,omitempty"`
}

// PipelineSettingsSpec is settings: in the YAML.
type PipelineSettingsSpec struct {
	DefaultCompute        string `yaml:"default_compute,omitempty"`
	DefaultDatastore      string `yaml:"default_datastore,omitempty"`
	ContinueOnStepFailure bool   `yaml:"continue_on_step_failure,omitempty"`
	ForceRerun            *bool  `yaml:"force_rerun,omitempty"`
}

// StepSpec is one step of a pipeline: a command, sweep or parallel job
// written inline or made from a component (component: ./file.yml, or
// azureml:NAME:VERSION), its inputs and outputs bound to the pipeline's
// and to other steps' (${{parent.…}}).
type StepSpec struct {
	Type                 string               `yaml:"type,omitempty"`
	Component            string               `yaml:"component,omitempty"`
	Name                 string               `yaml:"name,omitempty"`
	DisplayName          string               `yaml:"display_name,omitempty"`
	Description          string               `yaml:"description,omitempty"`
	Tags                 map[string]string    `yaml:"tags,omitempty"`
	Command              string               `yaml:"command,omitempty"`
	Code                 string               `yaml:"code,omitempty"`
	Environment          yaml.Node            `yaml:"environment,omitempty"`
	Compute              string               `yaml:"compute,omitempty"`
	Resources            *JobResourcesSpec    `yaml:"resources,omitempty"`
	Distribution         *DistributionSpec    `yaml:"distribution,omitempty"`
	EnvironmentVariables map[string]string    `yaml:"environment_variables,omitempty"`
	Limits               *JobLimitsSpec       `yaml:"limits,omitempty"`
	Inputs               map[string]yaml.Node `yaml:"inputs,omitempty"`
	Outputs              map[string]yaml.Node `yaml:"outputs,omitempty"`
	// A sweep step's.
	SweepSpec `yaml:",inline"`
	// A parallel step's.
	ParallelStepSpec `yaml:",inline"`
	// A component file's own keys (component: ./file.yml).
	Schema          string `yaml:"$schema,omitempty"`
	Version         string `yaml:"version,omitempty"`
	IsDeterministic *bool  `yaml:"is_deterministic,omitempty"`
	ExperimentName  string `yaml:"experiment_name,omitempty"`
}

// ParallelStepSpec is what a parallel step adds.
type ParallelStepSpec struct {
	InputData                 string             `yaml:"input_data,omitempty"`
	MiniBatchSize             string             `yaml:"mini_batch_size,omitempty"`
	PartitionKeys             []string           `yaml:"partition_keys,omitempty"`
	MaxConcurrencyPerInstance int32              `yaml:"max_concurrency_per_instance,omitempty"`
	ErrorThreshold            *int32             `yaml:"error_threshold,omitempty"`
	MiniBatchErrorThreshold   *int32             `yaml:"mini_batch_error_threshold,omitempty"`
	LoggingLevel              string             `yaml:"logging_level,omitempty"`
	RetrySettings             *RetrySettingsSpec `yaml:"retry_settings,omitempty"`
	Task                      *TaskSpec          `yaml:"task,omitempty"`
}

// RetrySettingsSpec is retry_settings: (timeout in seconds).
type RetrySettingsSpec struct {
	MaxRetries *int32 `yaml:"max_retries,omitempty"`
	Timeout    *int32 `yaml:"timeout,omitempty"`
}

// TaskSpec is a parallel step's task: (args is the older name of
// program_arguments, as some of Azure's examples still write it).
type TaskSpec struct {
	Type                 string            `yaml:"type,omitempty"`
	Code                 string            `yaml:"code,omitempty"`
	EntryScript          string            `yaml:"entry_script,omitempty"`
	ProgramArguments     string            `yaml:"program_arguments,omitempty"`
	Args                 string            `yaml:"args,omitempty"`
	Environment          yaml.Node         `yaml:"environment,omitempty"`
	AppendRowTo          string            `yaml:"append_row_to,omitempty"`
	EnvironmentVariables map[string]string `yaml:"environment_variables,omitempty"`
}

// pipelineToARM converts a pipeline-job YAML to the REST PipelineJob, as
// azure-ai-ml does, but with every step inline (a component file's fields
// are copied into its step): local folders (code, inputs) are packed and
// uploaded, environments resolved, and bindings kept for the server.
func (s JobSpec) pipelineToARM(ctx context.Context, c *client.Client, baseDir string) (api.Job, error) {
	sc := api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}
	if c != nil {
		sc = c.Scope
	}
	if s.Command != "" || s.Code != "" || s.Environment.Kind != 0 || s.Resources != nil || s.Distribution != nil || s.Trial != nil {
		return api.Job{}, fmt.Errorf("a pipeline job runs its jobs: give command, code, environment and resources in each of its jobs")
	}
	if len(s.Jobs) == 0 {
		return api.Job{}, fmt.Errorf("a pipeline job needs jobs: (its steps)")
	}
	name := s.Name
	if name == "" {
		name = newJobName()
	}
	j := api.Job{Name: name}
	p := &j.Properties
	p.JobType, p.DisplayName, p.ExperimentName, p.Description, p.Tags, p.Priority = api.JobTypePipeline, s.DisplayName, s.ExperimentName, s.Description, s.Tags, s.Priority
	if p.DisplayName == "" {
		p.DisplayName = name
	}
	if p.ExperimentName == "" {
		p.ExperimentName = "Default"
	}
	if s.Compute != "" {
		p.ComputeID = sc.ComputeID(strings.TrimPrefix(s.Compute, "azureml:"))
	}
	if st := s.Settings; st != nil {
		p.Settings = &api.PipelineSettings{DefaultDatastore: st.DefaultDatastore, ContinueOnStepFailure: st.ContinueOnStepFailure, ForceRerun: st.ForceRerun}
		if st.DefaultCompute != "" {
			p.Settings.DefaultCompute = sc.ComputeID(strings.TrimPrefix(st.DefaultCompute, "azureml:"))
		}
	}
	if l := s.Limits; l != nil {
		if l.MaxCost != 0 || l.MaxTotalTrials != 0 || l.MaxConcurrentTrials != 0 || l.TrialTimeout != 0 {
			return j, fmt.Errorf("a pipeline's limits take timeout only")
		}
		if l.Timeout > 0 {
			p.Limits = &api.JobLimits{JobLimitsType: "Command", Timeout: fmt.Sprintf("PT%dS", l.Timeout)}
		}
	}
	var err error
	if p.Inputs, p.Outputs, err = jobIO(ctx, c, baseDir, s.Inputs, s.Outputs); err != nil {
		return j, err
	}
	p.Jobs = map[string]*api.PipelineStep{}
	for _, sn := range slices.Sorted(maps.Keys(s.Jobs)) {
		step, err := s.Jobs[sn].toARM(ctx, c, baseDir, sn, sc)
		if err != nil {
			return j, fmt.Errorf("jobs.%s: %w", sn, err)
		}
		p.Jobs[sn] = step
	}
	return j, nil
}

// toARM converts one step.
func (st *StepSpec) toARM(ctx context.Context, c *client.Client, baseDir, name string, sc api.Scope) (*api.PipelineStep, error) {
	if st == nil {
		return nil, fmt.Errorf("the step is empty")
	}
	s := *st
	step := &api.PipelineStep{}
	switch {
	case strings.HasPrefix(s.Component, "azureml:"):
		step.ComponentID = s.Component // the server copies the registered component's fields
	case s.Component != "":
		comp, err := loadYAML[StepSpec](resolve(baseDir, s.Component))
		if err != nil {
			return nil, fmt.Errorf("component: %w", err)
		}
		compDir := filepath.Dir(resolve(baseDir, s.Component))
		merged, err := comp.under(s, compDir, baseDir)
		if err != nil {
			return nil, fmt.Errorf("component %s: %w", s.Component, err)
		}
		s = merged
	}
	kind := strings.ToLower(s.Type)
	if kind == "" && step.ComponentID == "" {
		kind = "command"
	}
	step.Type = kind
	cmd := JobSpec{Type: "command", Name: name, Command: s.Command, Code: s.Code, Environment: s.Environment, Resources: s.Resources,
		Distribution: s.Distribution, EnvironmentVariables: s.EnvironmentVariables, Limits: s.Limits, DisplayName: s.DisplayName,
		Description: s.Description, Tags: s.Tags, Compute: s.Compute}
	switch kind {
	case "sweep":
		cmd.Type, cmd.SweepSpec = "sweep", s.SweepSpec
	case "parallel":
		if s.Task == nil {
			return nil, fmt.Errorf("a parallel step needs task: (entry_script, code, environment)")
		}
		cmd.Code, cmd.Environment = s.Task.Code, s.Task.Environment
	}
	j, err := cmd.commandToARM(ctx, c, baseDir, false)
	if err != nil {
		return nil, err
	}
	step.JobProperties = j.Properties
	if s.DisplayName == "" {
		step.DisplayName = "" // the step's name, given by the server
	}
	step.ExperimentName = s.ExperimentName
	if kind == "parallel" {
		t := s.Task
		args := t.ProgramArguments
		if args == "" {
			args = t.Args
		}
		ps := &api.ParallelSpec{InputData: s.InputData, MiniBatchSize: api.FlexString(s.MiniBatchSize), PartitionKeys: s.PartitionKeys,
			MaxConcurrencyPerInstance: s.MaxConcurrencyPerInstance, ErrorThreshold: s.ErrorThreshold, MiniBatchErrorThreshold: s.MiniBatchErrorThreshold,
			LoggingLevel: s.LoggingLevel,
			Task: &api.ParallelTask{Type: t.Type, Code: step.CodeID, EntryScript: t.EntryScript, ProgramArguments: strings.TrimSpace(args),
				Environment: step.EnvironmentID, AppendRowTo: t.AppendRowTo, EnvironmentVariables: t.EnvironmentVariables}}
		if r := s.RetrySettings; r != nil {
			ps.RetrySettings = &api.RetrySettings{MaxRetries: r.MaxRetries, Timeout: r.Timeout}
		}
		step.ParallelSpec = ps
		step.Command = ""
	} else if s.InputData != "" || s.Task != nil || s.MiniBatchSize != "" {
		return nil, fmt.Errorf("input_data, mini_batch_size and task belong to parallel steps (type: parallel)")
	}
	for k, n := range s.Inputs {
		in, err := stepInput(ctx, c, baseDir, k, n)
		if err != nil {
			return nil, err
		}
		if step.Inputs == nil {
			step.Inputs = map[string]api.JobInput{}
		}
		step.Inputs[k] = in
	}
	for k, n := range s.Outputs {
		o, err := stepOutput(k, n)
		if err != nil {
			return nil, err
		}
		if step.Outputs == nil {
			step.Outputs = map[string]api.JobOutput{}
		}
		step.Outputs[k] = o
	}
	return step, nil
}

// under is a component file's step with the pipeline's step s laid over
// it: what s sets wins; its inputs are the component's defaults with the
// step's values over them. Paths in the component are relative to its
// folder, made relative to the pipeline's.
func (comp StepSpec) under(s StepSpec, compDir, baseDir string) (StepSpec, error) {
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(expandHome(p)) {
			return p
		}
		r, err := filepath.Rel(baseDir, filepath.Join(compDir, p))
		if err != nil {
			return filepath.Join(compDir, p)
		}
		return r
	}
	out := comp
	out.Component, out.Schema, out.Version, out.IsDeterministic, out.Name = "", "", "", nil, ""
	out.Code = rel(comp.Code)
	if out.Task != nil {
		t := *out.Task
		t.Code = rel(t.Code)
		out.Task = &t
	}
	if s.Type != "" {
		out.Type = s.Type
	}
	if s.Command != "" {
		out.Command = s.Command
	}
	if s.Code != "" {
		out.Code = s.Code
	}
	if s.Environment.Kind != 0 {
		out.Environment = s.Environment
	}
	if s.Compute != "" {
		out.Compute = s.Compute
	}
	if s.Resources != nil {
		out.Resources = s.Resources
	}
	if s.Distribution != nil {
		out.Distribution = s.Distribution
	}
	if s.Limits != nil {
		out.Limits = s.Limits
	}
	if s.DisplayName != "" {
		out.DisplayName = s.DisplayName
	}
	for k, v := range s.EnvironmentVariables {
		if out.EnvironmentVariables == nil {
			out.EnvironmentVariables = map[string]string{}
		}
		out.EnvironmentVariables[k] = v
	}
	if s.Task != nil {
		out.Task = s.Task
	}
	if s.InputData != "" {
		out.InputData = s.InputData
	}
	if s.MiniBatchSize != "" {
		out.MiniBatchSize = s.MiniBatchSize
	}
	if s.RetrySettings != nil {
		out.RetrySettings = s.RetrySettings
	}
	if s.MaxConcurrencyPerInstance != 0 {
		out.MaxConcurrencyPerInstance = s.MaxConcurrencyPerInstance
	}
	if s.ErrorThreshold != nil {
		out.ErrorThreshold = s.ErrorThreshold
	}
	if s.MiniBatchErrorThreshold != nil {
		out.MiniBatchErrorThreshold = s.MiniBatchErrorThreshold
	}
	if s.LoggingLevel != "" {
		out.LoggingLevel = s.LoggingLevel
	}
	if s.PartitionKeys != nil {
		out.PartitionKeys = s.PartitionKeys
	}
	// The component declares its inputs (type, default); the step gives
	// their values.
	out.Inputs = map[string]yaml.Node{}
	for k, n := range comp.Inputs {
		var decl struct {
			Type     string    `yaml:"type"`
			Default  yaml.Node `yaml:"default"`
			Optional bool      `yaml:"optional"`
		}
		if n.Kind == yaml.MappingNode && n.Decode(&decl) == nil && decl.Default.Kind == yaml.ScalarNode {
			out.Inputs[k] = decl.Default
		}
	}
	maps.Copy(out.Inputs, s.Inputs)
	out.Outputs = map[string]yaml.Node{}
	for k, n := range comp.Outputs {
		if n.Kind == yaml.MappingNode {
			var decl struct {
				Type string `yaml:"type"`
			}
			if n.Decode(&decl) == nil && decl.Type != "" {
				var typed yaml.Node
				if err := typed.Encode(map[string]string{"type": decl.Type}); err == nil {
					out.Outputs[k] = typed
					continue
				}
			}
		}
		out.Outputs[k] = yaml.Node{Kind: yaml.MappingNode}
	}
	maps.Copy(out.Outputs, s.Outputs)
	return out, nil
}

// stepInput reads one input of a step: a binding (${{parent.…}}), a
// literal, or {type, path, mode} whose path is a binding, a URI or a local
// folder (uploaded).
func stepInput(ctx context.Context, c *client.Client, baseDir, name string, n yaml.Node) (api.JobInput, error) {
	if n.Kind == yaml.ScalarNode { // a literal, or a binding the server resolves
		return api.JobInput{JobInputType: "literal", Value: n.Value}, nil
	}
	var in struct {
		Type  string `yaml:"type"`
		Path  string `yaml:"path"`
		Mode  string `yaml:"mode"`
		Value string `yaml:"value"`
	}
	if err := n.Decode(&in); err != nil {
		return api.JobInput{}, fmt.Errorf("inputs.%s: %w", name, err)
	}
	if strings.Contains(in.Path, "${{") {
		t := in.Type
		if t == "" {
			t = "uri_folder"
		}
		return api.JobInput{JobInputType: t, URI: strings.TrimSpace(in.Path), Mode: in.Mode}, nil
	}
	if in.Value != "" {
		return api.JobInput{JobInputType: "literal", Value: in.Value}, nil
	}
	return inputOf(ctx, c, baseDir, name, n)
}

// stepOutput reads one output of a step: a binding to a pipeline output, or
// {type, mode, path}.
func stepOutput(name string, n yaml.Node) (api.JobOutput, error) {
	if n.Kind == yaml.ScalarNode {
		if strings.Contains(n.Value, "${{") {
			return api.JobOutput{JobOutputType: "uri_folder", URI: strings.TrimSpace(n.Value)}, nil
		}
		return api.JobOutput{}, fmt.Errorf("outputs.%s: give {type, mode} or ${{parent.outputs.<name>}}", name)
	}
	var o OutputSpec
	if n.Kind != 0 {
		if err := n.Decode(&o); err != nil {
			return api.JobOutput{}, fmt.Errorf("outputs.%s: %w", name, err)
		}
	}
	if o.Type == "" {
		o.Type = "uri_folder"
	}
	return api.JobOutput{JobOutputType: o.Type, URI: o.Path, Mode: o.Mode}, nil
}

// computes are the names of the computes a job file runs on: its own, or
// a pipeline's default and its steps'.
func (s JobSpec) computes() []string {
	seen := map[string]bool{}
	var out []string
	add := func(c string) {
		c = strings.TrimPrefix(c, "azureml:")
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	add(s.Compute)
	if s.Settings != nil {
		add(s.Settings.DefaultCompute)
	}
	for _, n := range slices.Sorted(maps.Keys(s.Jobs)) {
		if st := s.Jobs[n]; st != nil {
			add(st.Compute)
		}
	}
	return out
}
