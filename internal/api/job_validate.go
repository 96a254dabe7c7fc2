package api

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// MinJobTimeout and MaxJobTimeout bound limits.timeout.
const (
	MinJobTimeout = time.Second
	MaxJobTimeout = 90 * 24 * time.Hour
)

// CheckJobName applies the job name rule: 1–255 characters of letters,
// digits, '-' and '_', starting with a letter or digit.
func CheckJobName(name string) error {
	if len(name) < 1 || len(name) > 255 {
		return fmt.Errorf("job name %q must be 1 to 255 characters long", name)
	}
	if !isLetter(name[0]) && !isDigit(name[0]) {
		return fmt.Errorf("job name %q must start with a letter or digit", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '-' && c != '_' {
			return fmt.Errorf("job name %q may contain only letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// PrepareJob validates a submitted command job and fills defaults. It
// does not check that the compute exists (the caller does, with the store).
func PrepareJob(j *Job, name string) error {
	if j.IsSweep() {
		return prepareSweep(j, name)
	}
	if j.IsPipeline() {
		return preparePipeline(j, name)
	}
	var v Validation
	if err := CheckJobName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	p := &j.Properties
	if p.JobType == "" {
		p.JobType = JobTypeCommand
	}
	switch {
	case strings.EqualFold(p.JobType, JobTypeCommand):
		p.JobType = JobTypeCommand
	case j.IsParallel():
		p.JobType = JobTypeParallel
		prepareParallel(j, &v)
	default:
		v.Add(CodeValidationError, "properties.jobType", "jobType %q is not supported; Cumulus runs Command, Sweep and Pipeline jobs (with command, sweep and parallel steps)", p.JobType)
	}
	if p.ParallelSpec != nil && !j.IsParallel() {
		v.Add(CodeValidationError, "properties.jobType", "input_data, mini_batch_size, task and the other parallel settings belong to a pipeline's parallel steps (type: parallel)")
	}
	if p.Jobs != nil || p.Settings != nil {
		v.Add(CodeValidationError, "properties.jobType", "jobs and settings belong to pipeline jobs; set jobType Pipeline")
	}
	p.Pipeline = nil // read-only
	if p.Trial != nil || p.SearchSpace != nil || p.SamplingAlgorithm != nil || p.Objective != nil || p.EarlyTermination != nil ||
		(p.Limits != nil && (p.Limits.MaxTotalTrials != 0 || p.Limits.MaxConcurrentTrials != 0 || p.Limits.TrialTimeout != "")) {
		v.Add(CodeValidationError, "properties.jobType", "trial, searchSpace, samplingAlgorithm, objective, earlyTermination and trial limits belong to Sweep jobs; set jobType Sweep")
	}
	p.Sweep, p.Metrics = nil, nil // read-only
	if strings.TrimSpace(p.Command) == "" {
		v.Add(CodeValidationError, "properties.command", "command is required")
	}
	if p.ComputeID == "" {
		v.Add(CodeValidationError, "properties.computeId", "computeId is required: the compute cluster to run on")
	}
	if p.Resources == nil {
		p.Resources = &JobResources{}
	}
	if p.Resources.InstanceCount == 0 {
		p.Resources.InstanceCount = 1
	}
	if p.Resources.InstanceCount < 1 {
		v.Add(CodeValidationError, "properties.resources.instanceCount", "instanceCount must be at least 1, got %d", p.Resources.InstanceCount)
	}
	if _, err := ParseShmSize(p.Resources.ShmSize); err != nil {
		v.Add(CodeValidationError, "properties.resources.shmSize", "%s", err)
	}
	p.Cost = nil     // read-only
	p.Services = nil // read-only: filled when the job is answered
	if l := p.Limits; l != nil && l.MaxCost != nil {
		if l.JobLimitsType == "" {
			l.JobLimitsType = "Command"
		}
		if c := *l.MaxCost; math.IsNaN(c) || math.IsInf(c, 0) || c <= 0 {
			v.Add(CodeValidationError, "properties.limits.maxCost", "limits.maxCost must be a positive amount in the server's currency, got %v", c)
		}
	}
	if p.Limits != nil && p.Limits.Timeout != "" {
		if p.Limits.JobLimitsType == "" {
			p.Limits.JobLimitsType = "Command"
		}
		d, err := ParseDuration(p.Limits.Timeout)
		switch {
		case err != nil:
			v.Add(CodeValidationError, "properties.limits.timeout", "limits.timeout: %s", err)
		case d < MinJobTimeout || d > MaxJobTimeout:
			v.Add(CodeValidationError, "properties.limits.timeout", "limits.timeout must be between 1 second and 90 days, got %s", p.Limits.Timeout)
		}
	}
	for k := range p.EnvironmentVariables {
		if !validEnvName(k) {
			v.Add(CodeValidationError, "properties.environmentVariables", "environment variable name %q must be letters, digits and '_', not starting with a digit", k)
		} else if strings.HasPrefix(k, "CUMULUS_") {
			v.Add(CodeValidationError, "properties.environmentVariables", "environment variable %q is reserved (CUMULUS_ variables are set by the node)", k)
		}
	}
	checkInputs(&v, "properties.inputs", p.Inputs)
	rowsTo, _ := j.ParallelRows()
	for k, out := range p.Outputs {
		if !validEnvName(k) {
			v.Add(CodeValidationError, "properties.outputs", "output name %q must be letters, digits and '_'", k)
		}
		switch t := strings.ToLower(out.JobOutputType); {
		case t == "uri_folder" || t == "":
		case t == "uri_file" && k == rowsTo:
		case t == "uri_file":
			v.Add(CodeValidationError, "properties.outputs."+k+".jobOutputType", "output %s: a uri_file output is supported as a parallel step's task.append_row_to; give a uri_folder output and write the file in it", k)
		default:
			v.Add(CodeValidationError, "properties.outputs."+k+".jobOutputType", "output %s: jobOutputType %q is not supported (uri_folder)", k, out.JobOutputType)
		}
		if k == "default" {
			v.Add(CodeValidationError, "properties.outputs", "output name \"default\" is reserved for $CUMULUS_OUTPUT_DIR")
		}
		out.BlobPath = nil // read-only: resolved at submission
		checkOutputMode(&v, k, &out)
		p.Outputs[k] = out
	}
	p.CodeBlobPath, p.EnvironmentNote = nil, "" // read-only: resolved at submission
	if d := p.Distribution; d != nil {
		checkDistribution(&v, d, p.Resources.InstanceCount)
	}
	checkTags(&v, p.Tags)
	prepareJobMinRuntime(&v, p)
	return v.Err()
}

// checkInputs validates a job's (or pipeline's) inputs: literals, and
// folders, files and mltables (a folder with an MLTable file) by uri.
func checkInputs(v *Validation, target string, inputs map[string]JobInput) {
	for k, in := range inputs {
		if !validEnvName(k) {
			v.Add(CodeValidationError, target, "input name %q must be letters, digits and '_'", k)
		}
		switch strings.ToLower(in.JobInputType) {
		case "literal":
		case "uri_folder", "uri_file", "mltable":
			if in.URI == "" {
				v.Add(CodeValidationError, target+"."+k+".uri", "input %s needs a uri", k)
			}
		default:
			v.Add(CodeValidationError, target+"."+k+".jobInputType", "input %s: jobInputType %q is not one of uri_folder, uri_file, mltable, literal", k, in.JobInputType)
		}
		if err := checkBlobURI(in.URI); err != nil {
			v.Add(CodeValidationError, target+"."+k+".uri", "input %s: %s", k, err)
		}
		in.BlobPath = nil // read-only: resolved at submission
		checkInputMode(v, k, &in)
		inputs[k] = in
	}
}

func validEnvName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// checkDistribution validates the distributed-training wiring.
func checkDistribution(v *Validation, d *Distribution, instances int32) {
	const target = "properties.distribution"
	if d.ProcessCountPerInstance == 0 {
		d.ProcessCountPerInstance = 1
	}
	if d.ProcessCountPerInstance < 1 || d.ProcessCountPerInstance > 128 {
		v.Add(CodeValidationError, target+".processCountPerInstance", "processCountPerInstance must be between 1 and 128, got %d", d.ProcessCountPerInstance)
	}
	switch strings.ToLower(d.DistributionType) {
	case "mpi":
		d.DistributionType = "Mpi"
	case "pytorch":
		d.DistributionType = "PyTorch"
	case "tensorflow":
		d.DistributionType = "TensorFlow"
		total := instances * d.ProcessCountPerInstance
		if d.WorkerCount == 0 {
			d.WorkerCount = total - d.ParameterServerCount
		}
		if d.ParameterServerCount < 0 || d.WorkerCount < 1 || d.WorkerCount+d.ParameterServerCount != total {
			v.Add(CodeValidationError, target, "tensorflow: workerCount %d + parameterServerCount %d must equal the job's %d processes (instanceCount × processCountPerInstance)",
				d.WorkerCount, d.ParameterServerCount, total)
		}
	default:
		v.Add(CodeValidationError, target+".distributionType", "distributionType %q is not one of Mpi, PyTorch, TensorFlow", d.DistributionType)
	}
}
