package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/pipeline"
)

// JobTypePipeline is the jobType of a pipeline job: steps (command, sweep
// and parallel jobs) that read each other's outputs, each run as a child
// job on its compute.
const JobTypePipeline = "Pipeline"

// PipelineSettings are a pipeline's settings (REST: an untyped object; the
// keys az ml and azure-ai-ml send).
type PipelineSettings struct {
	DefaultCompute        string `json:"default_compute,omitempty"`
	DefaultDatastore      string `json:"default_datastore,omitempty"`
	ContinueOnStepFailure bool   `json:"continue_on_step_failure,omitempty"`
	// ForceRerun: Cumulus always runs every step (it reuses no earlier
	// step's results), which is force_rerun true; false is accepted, as
	// reuse is only ever an optimization.
	ForceRerun *bool  `json:"force_rerun,omitempty"`
	Source     string `json:"_source,omitempty"` // azure-ai-ml's note of where the job came from
}

// PipelineStep is one entry of a pipeline's jobs: a job's properties (a
// command, sweep or parallel job) whose inputs and outputs may bind to the
// pipeline's (${{parent.inputs.x}}, ${{parent.outputs.z}}) and to other
// steps' outputs (${{parent.jobs.<step>.outputs.<o>}}).
type PipelineStep struct {
	// Type is the step's kind as az ml names it: command, sweep or
	// parallel (jobType is filled from it, and it from jobType).
	Type string `json:"type,omitempty"`
	// ComponentID is the component version the step was made from (its
	// fields are copied into the step when the pipeline is submitted).
	ComponentID string `json:"componentId,omitempty"`
	JobProperties
}

// PipelineStatus is where a pipeline's steps stand (read-only, a Cumulus
// extension written by its controller).
type PipelineStatus struct {
	// Order is the steps in the order they can run.
	Order []string               `json:"order"`
	Steps map[string]*StepStatus `json:"steps"`
}

// StepStatus is one step: its job once created, and its status (the
// job's, or NotStarted with why it never ran).
type StepStatus struct {
	Job    string `json:"job,omitempty"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// After are the steps whose outputs it reads.
	After []string `json:"after,omitempty"`
	// Outputs are the step's outputs as the steps after it read them (a
	// URI per output), once it completed.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// IsPipeline reports whether j is a pipeline job.
func (j *Job) IsPipeline() bool { return strings.EqualFold(j.Properties.JobType, JobTypePipeline) }

// StepJobName is the name of a pipeline's child job for a step.
func StepJobName(pipelineName, step string) string { return pipelineName + "_" + step }

// binding is one ${{…}} reference of a pipeline step.
type binding struct {
	kind  string // "input" (parent.inputs.x), "output" (parent.outputs.z), "step" (parent.jobs.s.outputs.o)
	name  string // x, z or o
	step  string // s
	whole bool   // the value is the reference and nothing else
}

// parseBinding reads a value that is ${{parent.…}} ("" kind: none).
func parseBinding(v string) (binding, error) {
	t := strings.TrimSpace(v)
	if !strings.HasPrefix(t, "${{") || !strings.HasSuffix(t, "}}") {
		if strings.Contains(v, "${{parent.") {
			return binding{}, fmt.Errorf("%q: a ${{parent.…}} binding must be the whole value", v)
		}
		return binding{}, nil
	}
	ref := strings.TrimSpace(t[3 : len(t)-2])
	parts := strings.Split(ref, ".")
	switch {
	case len(parts) == 3 && parts[0] == "parent" && parts[1] == "inputs":
		return binding{kind: "input", name: parts[2], whole: true}, nil
	case len(parts) == 3 && parts[0] == "parent" && parts[1] == "outputs":
		return binding{kind: "output", name: parts[2], whole: true}, nil
	case len(parts) == 5 && parts[0] == "parent" && parts[1] == "jobs" && parts[3] == "outputs":
		return binding{kind: "step", step: parts[2], name: parts[4], whole: true}, nil
	case parts[0] == "parent":
		return binding{}, fmt.Errorf("%q is not ${{parent.inputs.<name>}}, ${{parent.outputs.<name>}} or ${{parent.jobs.<step>.outputs.<name>}}", v)
	}
	return binding{}, nil
}

// inputBinding is the binding of a step input (in its value or its uri).
func inputBinding(in JobInput) (binding, error) {
	if b, err := parseBinding(in.Value); err != nil || b.kind != "" {
		return b, err
	}
	return parseBinding(in.URI)
}

// stepKind normalizes a step's type and jobType.
func stepKind(s *PipelineStep) error {
	t := strings.ToLower(s.Type)
	if t == "" {
		t = strings.ToLower(s.JobType)
	}
	switch t {
	case "", "command":
		s.Type, s.JobType = "command", JobTypeCommand
	case "sweep":
		s.Type, s.JobType = "sweep", JobTypeSweep
	case "parallel":
		s.Type, s.JobType = "parallel", JobTypeParallel
	case "pipeline":
		return fmt.Errorf("a pipeline step of type pipeline (a pipeline component) is not supported; put its steps in this pipeline")
	default:
		return fmt.Errorf("type %q is not one of command, sweep, parallel", s.Type)
	}
	return nil
}

// StepOrder is the pipeline's steps with the steps each reads from, in the
// order they can run (checked at submission).
func (j *Job) StepOrder() ([]pipeline.Step, error) {
	var steps []pipeline.Step
	for name, s := range j.Properties.Jobs {
		st := pipeline.Step{Name: name}
		for _, in := range s.Inputs {
			if b, _ := inputBinding(in); b.kind == "step" && !slices.Contains(st.After, b.step) {
				st.After = append(st.After, b.step)
			}
		}
		slices.Sort(st.After)
		steps = append(steps, st)
	}
	order, err := pipeline.Order(steps)
	if err != nil {
		return nil, err
	}
	byName := map[string]pipeline.Step{}
	for _, s := range steps {
		byName[s.Name] = s
	}
	out := make([]pipeline.Step, len(order))
	for i, n := range order {
		out[i] = byName[n]
	}
	return out, nil
}

// PipelineOutput is the step output that pipeline output z is bound to.
func (j *Job) PipelineOutput(z string) (step, output string, ok bool) {
	for _, sn := range slices.Sorted(maps.Keys(j.Properties.Jobs)) {
		s := j.Properties.Jobs[sn]
		for _, on := range slices.Sorted(maps.Keys(s.Outputs)) {
			if b, _ := parseBinding(s.Outputs[on].URI); b.kind == "output" && b.name == z {
				return sn, on, true
			}
		}
	}
	return "", "", false
}

// StepOutput resolves ${{parent.jobs.<step>.outputs.<o>}} for a step that
// reads it: the input it becomes (its uri), or an error when the output is
// not there.
type StepOutput func(step, output string) (JobInput, error)

// PlaceholderOutput stands for every step output, for checking the steps'
// jobs before any ran.
func PlaceholderOutput(step, output string) (JobInput, error) {
	return JobInput{JobInputType: "uri_folder", URI: BlobURIScheme + strings.Repeat("0", 64)}, nil
}

// StepJob is the child job of a pipeline's step, named name: the step's
// job with the pipeline's compute, experiment and priority where the step
// names none, and its bindings resolved — parent inputs copied, other
// steps' outputs through out, parent outputs left to the step (the
// pipeline's output z is the step's output it binds).
func (j *Job) StepJob(step, name string, out StepOutput) (Job, error) {
	pp := &j.Properties
	s, ok := pp.Jobs[step]
	if !ok {
		return Job{}, fmt.Errorf("pipeline %s has no step %s", j.Name, step)
	}
	c := Job{Name: name, Properties: s.JobProperties}
	p := &c.Properties
	p.Jobs, p.Settings, p.Pipeline = nil, nil, nil
	if p.ComputeID == "" {
		p.ComputeID = pp.ComputeID
	}
	if p.ExperimentName == "" {
		p.ExperimentName = pp.ExperimentName
	}
	if p.Priority == 0 {
		p.Priority = pp.Priority
	}
	if p.QueueSettings == nil {
		p.QueueSettings = pp.QueueSettings
	}
	if p.Identity == nil {
		p.Identity = pp.Identity
	}
	if p.DisplayName == "" {
		p.DisplayName = step
	}
	p.ParentJobName, p.PipelineStep = j.Name, step
	p.Inputs = maps.Clone(s.Inputs)
	for k, in := range p.Inputs {
		b, err := inputBinding(in)
		if err != nil {
			return c, fmt.Errorf("step %s: inputs.%s: %w", step, k, err)
		}
		switch b.kind {
		case "input":
			pin, ok := pp.Inputs[b.name]
			if !ok {
				return c, fmt.Errorf("step %s: inputs.%s binds ${{parent.inputs.%s}}, which the pipeline does not have", step, k, b.name)
			}
			if in.Mode != "" && !strings.EqualFold(pin.JobInputType, "literal") {
				pin.Mode = in.Mode
			}
			p.Inputs[k] = pin
		case "step":
			got, err := out(b.step, b.name)
			if err != nil {
				return c, fmt.Errorf("step %s: inputs.%s: %w", step, k, err)
			}
			if t := in.JobInputType; t != "" && !strings.EqualFold(t, "literal") {
				got.JobInputType = t
			}
			got.Mode, got.Description = in.Mode, fmt.Sprintf("output %s of step %s", b.name, b.step)
			p.Inputs[k] = got
		case "output":
			return c, fmt.Errorf("step %s: inputs.%s binds a pipeline output; inputs bind ${{parent.inputs.<name>}} or ${{parent.jobs.<step>.outputs.<name>}}", step, k)
		}
	}
	p.Outputs = maps.Clone(s.Outputs)
	for k, o := range p.Outputs {
		if b, _ := parseBinding(o.URI); b.kind != "" {
			o.URI = ""
			p.Outputs[k] = o
		}
	}
	return c, nil
}

// preparePipeline validates a submitted pipeline job and fills defaults:
// each step is checked as the job it becomes (a command job as PrepareJob
// checks it, a sweep as a sweep, a parallel step as parallel), its
// bindings name what exists, and the steps form no cycle.
func preparePipeline(j *Job, name string) error {
	var v Validation
	if err := CheckJobName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	p := &j.Properties
	p.JobType, p.Cost, p.Sweep, p.Metrics, p.ParentJobName, p.Parameters, p.Pipeline = JobTypePipeline, nil, nil, nil, "", nil, nil
	if p.Command != "" || p.CodeID != "" || p.EnvironmentID != "" || p.Resources != nil || p.Distribution != nil || p.Trial != nil || p.ParallelSpec != nil {
		v.Add(CodeValidationError, "properties.jobs", "a pipeline job runs its steps: give command, code, environment and resources in its jobs")
	}
	if p.Limits != nil && p.Limits.MaxCost != nil {
		v.Add(CodeValidationError, "properties.limits.maxCost", "maxCost applies to command jobs, not pipelines")
	}
	if p.Limits != nil && p.Limits.Timeout != "" {
		p.Limits.JobLimitsType = "Command"
		if d, err := ParseDuration(p.Limits.Timeout); err != nil || d < MinJobTimeout || d > MaxJobTimeout {
			v.Add(CodeValidationError, "properties.limits.timeout", "limits.timeout must be an ISO 8601 duration between 1 second and 90 days, got %q", p.Limits.Timeout)
		}
	}
	if p.Settings == nil {
		p.Settings = &PipelineSettings{}
	}
	set := p.Settings
	if ds := set.DefaultDatastore; ds != "" && ds != "workspaceblobstore" {
		v.Add(CodeValidationError, "properties.settings.default_datastore", "default_datastore %q: steps' outputs are kept in workspaceblobstore", ds)
	}
	if set.DefaultCompute != "" && p.ComputeID == "" {
		p.ComputeID = set.DefaultCompute
	}
	if len(p.Jobs) == 0 {
		v.Add(CodeValidationError, "properties.jobs", "a pipeline needs at least one step in jobs")
	}
	checkInputs(&v, "properties.inputs", p.Inputs)
	for k, o := range p.Outputs {
		if !validEnvName(k) {
			v.Add(CodeValidationError, "properties.outputs", "output name %q must be letters, digits and '_'", k)
		}
		if t := strings.ToLower(o.JobOutputType); t != "" && t != "uri_folder" && t != "uri_file" {
			v.Add(CodeValidationError, "properties.outputs."+k+".jobOutputType", "output %s: jobOutputType %q is not uri_folder or uri_file", k, o.JobOutputType)
		}
	}
	checkTags(&v, p.Tags)
	bound := map[string]string{} // pipeline output → the step output it is
	for _, sn := range slices.Sorted(maps.Keys(p.Jobs)) {
		s := p.Jobs[sn]
		target := "properties.jobs." + sn
		if s == nil {
			v.Add(CodeValidationError, target, "step %s is empty", sn)
			continue
		}
		if !validEnvName(sn) {
			v.Add(CodeValidationError, target, "step name %q must be letters, digits and '_', not starting with a digit", sn)
		}
		clean := Job{Properties: s.JobProperties}
		clean.ClearReadOnly()
		s.JobProperties = clean.Properties
		if err := stepKind(s); err != nil {
			v.Add(CodeValidationError, target+".type", "step %s: %s", sn, err)
			continue
		}
		if len(StepJobName(name, sn)) > 255 {
			v.Add(CodeValidationError, target, "step %s: its job's name %s_%s would be longer than 255 characters", sn, name, sn)
		}
		if s.Jobs != nil || s.Settings != nil {
			v.Add(CodeValidationError, target, "step %s: a step cannot hold jobs of its own", sn)
		}
		for _, cmd := range []string{s.Command, s.programArguments()} {
			if strings.Contains(cmd, "${{parent.") {
				v.Add(CodeValidationError, target+".command", "step %s: its command binds ${{parent.…}}; bind the pipeline's values to the step's inputs and use ${{inputs.<name>}}", sn)
			}
		}
		for k, in := range s.Inputs {
			b, err := inputBinding(in)
			switch {
			case err != nil:
				v.Add(CodeValidationError, target+".inputs."+k, "step %s: %s", sn, err)
			case b.kind == "input":
				if _, ok := p.Inputs[b.name]; !ok {
					v.Add(CodeValidationError, target+".inputs."+k, "step %s binds ${{parent.inputs.%s}}, which the pipeline's inputs do not have (it has: %s)", sn, b.name, names(p.Inputs))
				}
			case b.kind == "step":
				up, ok := p.Jobs[b.step]
				switch {
				case !ok:
					v.Add(CodeValidationError, target+".inputs."+k, "step %s binds an output of step %s, which the pipeline does not have", sn, b.step)
				case up != nil:
					if _, ok := up.Outputs[b.name]; !ok {
						v.Add(CodeValidationError, target+".inputs."+k, "step %s binds output %s of step %s, which has no such output (it has: %s)", sn, b.name, b.step, names(up.Outputs))
					}
				}
			case b.kind == "output":
				v.Add(CodeValidationError, target+".inputs."+k, "step %s: an input cannot bind a pipeline output", sn)
			}
		}
		for k, o := range s.Outputs {
			b, err := parseBinding(o.URI)
			switch {
			case err != nil:
				v.Add(CodeValidationError, target+".outputs."+k, "step %s: %s", sn, err)
			case b.kind == "output":
				if _, ok := p.Outputs[b.name]; !ok {
					v.Add(CodeValidationError, target+".outputs."+k, "step %s binds ${{parent.outputs.%s}}, which the pipeline's outputs do not have (it has: %s)", sn, b.name, names(p.Outputs))
				} else if prev, dup := bound[b.name]; dup {
					v.Add(CodeValidationError, target+".outputs."+k, "pipeline output %s is bound by both %s and step %s's output %s", b.name, prev, sn, k)
				} else {
					bound[b.name] = "step " + sn + "'s output " + k
				}
			case b.kind != "":
				v.Add(CodeValidationError, target+".outputs."+k, "step %s: an output can bind only ${{parent.outputs.<name>}}", sn)
			}
		}
		if v.Err() != nil {
			continue
		}
		// Check the step as the job it becomes, its bindings standing in
		// for what they will be, and keep what that check filled in.
		c, err := j.StepJob(sn, StepJobName(name, sn), PlaceholderOutput)
		if err == nil {
			if c.Properties.ComputeID == "" {
				err = fmt.Errorf("it names no compute, and the pipeline has no settings.default_compute")
			} else {
				err = PrepareJob(&c, c.Name)
			}
		}
		if err != nil {
			v.Add(CodeValidationError, target, "step %s: %s", sn, err)
			continue
		}
		keep := s.JobProperties
		s.JobProperties = c.Properties
		s.Inputs, s.Outputs, s.DisplayName, s.ParentJobName, s.PipelineStep = keep.Inputs, keep.Outputs, keep.DisplayName, "", ""
		s.ExperimentName, s.Priority, s.QueueSettings, s.Identity = keep.ExperimentName, keep.Priority, keep.QueueSettings, keep.Identity
		if keep.ComputeID == "" {
			s.ComputeID = ""
		}
	}
	for z := range p.Outputs {
		if _, ok := bound[z]; !ok {
			v.Add(CodeValidationError, "properties.outputs."+z, "pipeline output %s is bound by no step (give a step's output uri: ${{parent.outputs.%s}})", z, z)
		}
	}
	if v.Err() == nil {
		if _, err := j.StepOrder(); err != nil {
			v.Add(CodeValidationError, "properties.jobs", "%s", err)
		}
	}
	return v.Err()
}

// names lists a map's keys for an error message.
func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
