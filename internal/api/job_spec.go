package api

import (
	"bytes"
	"encoding/json"
)

// A job's spec is what it runs; its metadata (description, tags, display
// name, archive flag) is what may change after it was submitted, as in Azure.
// Everything else on a job is read-only: written by Cumulus.

// ChangedSpec lists the fields of old's spec that new changes, by their
// JSON names, for a re-submission of a job under the same name: nil when
// new is old with only its metadata changed. A field a client leaves out
// counts as changed unless it is a Cumulus extension (priority, minRuntime), which
// Azure's clients do not echo back.
func ChangedSpec(old, new *Job) []string {
	o, n := &old.Properties, &new.Properties
	type field struct {
		name string
		a, b any
	}
	fields := []field{
		{"jobType", o.JobType, n.JobType},
		{"command", o.Command, n.Command},
		{"codeId", o.CodeID, n.CodeID},
		{"environmentId", o.EnvironmentID, n.EnvironmentID},
		{"environmentVariables", o.EnvironmentVariables, n.EnvironmentVariables},
		{"inputs", inputsAsGiven(o.Inputs), inputsAsGiven(n.Inputs)},
		{"outputs", outputsAsGiven(o.Outputs), outputsAsGiven(n.Outputs)},
		{"resources.instanceCount", old.InstanceCount(), new.InstanceCount()},
		{"distribution", o.Distribution, n.Distribution},
		{"limits", o.Limits, n.Limits},
		{"queueSettings", o.QueueSettings, n.QueueSettings},
		{"identity", o.Identity, n.Identity},
		{"experimentName", o.ExperimentName, n.ExperimentName},
		{"trial", o.Trial, n.Trial},
		{"searchSpace", o.SearchSpace, n.SearchSpace},
		{"samplingAlgorithm", o.SamplingAlgorithm, n.SamplingAlgorithm},
		{"objective", o.Objective, n.Objective},
		{"earlyTermination", o.EarlyTermination, n.EarlyTermination},
		{"jobs", o.Jobs, n.Jobs},
		{"settings", o.Settings, n.Settings},
		{"parallel", o.ParallelSpec, n.ParallelSpec},
	}
	if n.Priority != 0 {
		fields = append(fields, field{"priority", o.Priority, n.Priority})
	}
	if n.MinRuntime != "" {
		fields = append(fields, field{"minRuntime", o.MinRuntime, n.MinRuntime})
	}
	var out []string
	for _, f := range fields {
		if !sameJSON(f.a, f.b) {
			out = append(out, f.name)
		}
	}
	return out
}

// sameJSON compares two values as JSON, an empty value (null, "", 0, {},
// []) being the same as an absent one.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	return bytes.Equal(emptyJSON(x), emptyJSON(y))
}

func emptyJSON(b []byte) []byte {
	switch string(b) {
	case "null", `""`, "0", "{}", "[]", "false":
		return nil
	}
	return b
}

// SetMetadata copies onto j what may change on a submitted job.
func (j *Job) SetMetadata(from *Job) {
	p, f := &j.Properties, &from.Properties
	p.Description, p.Tags, p.DisplayName, p.IsArchived = f.Description, f.Tags, f.DisplayName, f.IsArchived
}

// ClearReadOnly drops from a submitted document what only Cumulus writes:
// status, history, attempts, times, cost, metrics and reasons. (A sweep's
// progress is PrepareJob's to clear: the server then starts it with its
// seed.)
func (j *Job) ClearReadOnly() {
	p := &j.Properties
	p.Status, p.StatusMessage, p.Waiting, p.History, p.Attempts = "", "", nil, nil, nil
	p.StartTime, p.EndTime, p.Cost, p.Metrics, p.Services = nil, nil, nil, nil, nil
	p.Pipeline, p.FairShareGroup = nil, nil
	if p.ParallelSpec != nil {
		p.ParallelSpec.Parallel = nil
	}
}

// IsParent reports whether j holds no nodes itself but runs child jobs
// that do: a sweep (its trials) or a pipeline (its steps).
func (j *Job) IsParent() bool { return j.IsSweep() || j.IsPipeline() }

// NodeCount is how many nodes the job's runs need at once, and the field
// that says it: its own instance count, or a sweep's trial's.
func (j *Job) NodeCount() (int, string) {
	if j.IsSweep() && j.Properties.Trial != nil {
		if r := j.Properties.Trial.Resources; r != nil && r.InstanceCount > 0 {
			return int(r.InstanceCount), "trial.resources.instanceCount"
		}
		return 1, "trial.resources.instanceCount"
	}
	return j.InstanceCount(), "resources.instanceCount"
}

// inputsAsGiven and outputsAsGiven are a job's inputs and outputs without
// where the server resolved them to (BlobPath): a re-submission names the
// same data even when, say, azureml:NAME@latest now resolves elsewhere.
func inputsAsGiven(in map[string]JobInput) map[string]JobInput {
	out := make(map[string]JobInput, len(in))
	for k, v := range in {
		v.BlobPath = nil
		out[k] = v
	}
	return out
}

func outputsAsGiven(in map[string]JobOutput) map[string]JobOutput {
	out := make(map[string]JobOutput, len(in))
	for k, v := range in {
		v.BlobPath = nil
		out[k] = v
	}
	return out
}
