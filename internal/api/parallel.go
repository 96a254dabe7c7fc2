package api

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/parallel"
)

// JobTypeParallel is the jobType of a pipeline's parallel step (batch
// inference) as its child job: mini-batches of its input_data handed to
// worker processes on its nodes, each calling the entry script's
// run(mini_batch). A parallel job exists only as a step of a pipeline.
const JobTypeParallel = "Parallel"

// ParallelSpec is what a parallel step adds to a job, with az ml's keys
// (the REST API carries a pipeline's steps as untyped objects, and
// azure-ai-ml sends these snake_case).
type ParallelSpec struct {
	// InputData is ${{inputs.<name>}}: the input split into mini-batches,
	// one item per file of a folder, or rows of a table (mltable, or a
	// CSV uri_file).
	InputData string `json:"input_data,omitempty"`
	// MiniBatchSize is files per mini-batch for a folder, the approximate
	// size of a mini-batch of rows for a table ("100kb", "1mb", or bytes).
	MiniBatchSize FlexString `json:"mini_batch_size,omitempty"`
	// PartitionKeys make each distinct combination of these columns of a
	// table one mini-batch (mini_batch_size then does not apply).
	PartitionKeys             []string       `json:"partition_keys,omitempty"`
	MaxConcurrencyPerInstance int32          `json:"max_concurrency_per_instance,omitempty"`
	ErrorThreshold            *int32         `json:"error_threshold,omitempty"`
	MiniBatchErrorThreshold   *int32         `json:"mini_batch_error_threshold,omitempty"`
	LoggingLevel              string         `json:"logging_level,omitempty"`
	RetrySettings             *RetrySettings `json:"retry_settings,omitempty"`
	Task                      *ParallelTask  `json:"task,omitempty"`
	// Parallel is the step's progress (read-only, a Cumulus extension).
	Parallel *ParallelStatus `json:"parallel,omitempty"`
}

// RetrySettings bound one run(mini_batch): how often a failed or timed-out
// mini-batch runs again, and its timeout in seconds.
type RetrySettings struct {
	MaxRetries *int32 `json:"max_retries,omitempty"`
	Timeout    *int32 `json:"timeout,omitempty"`
}

// ParallelTask is what each worker runs: run_function, the entry script's
// init() and run(mini_batch) from its code, in its environment.
type ParallelTask struct {
	Type             string `json:"type"`
	Code             string `json:"code,omitempty"`
	EntryScript      string `json:"entry_script"`
	ProgramArguments string `json:"program_arguments,omitempty"`
	Environment      string `json:"environment,omitempty"`
	// AppendRowTo is ${{outputs.<name>}}: the rows every run returns are
	// appended to one file there (parallel_run_step.txt in a folder).
	AppendRowTo          string            `json:"append_row_to,omitempty"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
}

// ParallelStatus is a parallel step's progress (read-only): its
// mini-batches as the nodes planned them, and how they stand.
type ParallelStatus struct {
	MiniBatches int        `json:"miniBatches"`
	Items       int        `json:"items"`
	Planned     *time.Time `json:"planned,omitempty"` // when the first node planned them: the rate counts from here
	Digest      string     `json:"digest,omitempty"`  // which split of input_data it is
	// Verdict is why the step failed once its thresholds were passed.
	Verdict     string `json:"verdict,omitempty"`
	Done        int    `json:"done"`
	Failed      int    `json:"failed"`
	Running     int    `json:"running"`
	Pending     int    `json:"pending"`
	Retried     int    `json:"retried"`
	FailedItems int    `json:"failedItems"`
	// PerSecond is mini-batches ended per second since planned, and
	// SecondsLeft about how long the rest takes at that pace (absent
	// before any ended).
	PerSecond   float64 `json:"miniBatchesPerSecond"`
	SecondsLeft *int64  `json:"secondsLeft,omitempty"`
	// Failures are the failed mini-batches (the first 100): their items
	// and the error of their last try.
	Failures []MiniBatchFailure `json:"failures,omitempty"`
}

// MiniBatchFailure is one failed mini-batch.
type MiniBatchFailure struct {
	Index int        `json:"index"`
	Tries int        `json:"tries"`
	Items []string   `json:"items"`
	Error string     `json:"error"`
	Ended *time.Time `json:"ended,omitempty"`
}

// FlexString is a value a client sends as a JSON string or a number
// (azure-ai-ml sends mini_batch_size either way).
type FlexString string

// UnmarshalJSON takes a string or a number.
func (f *FlexString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = FlexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("mini_batch_size must be a string or a number")
	}
	*f = FlexString(n.String())
	return nil
}

// IsParallel reports whether j is a parallel step's job.
func (j *Job) IsParallel() bool { return strings.EqualFold(j.Properties.JobType, JobTypeParallel) }

func (p *JobProperties) programArguments() string {
	if p.ParallelSpec != nil && p.Task != nil {
		return p.Task.ProgramArguments
	}
	return ""
}

// Defaults of a parallel step (az ml's parallel job schema).
const (
	DefaultMaxRetries     = 2
	DefaultRetryTimeout   = 60 // seconds
	DefaultRowsFile       = "parallel_run_step.txt"
	maxRetryTimeout       = 259200
	parallelDriverCommand = `"$(command -v python3 || command -v python)" "$CUMULUS_PARALLEL_DRIVER"`
)

// refName reads ${{inputs.x}} or ${{outputs.x}} (kind "inputs"/"outputs").
func refName(v, kind string) (string, bool) {
	t := strings.TrimSpace(v)
	if !strings.HasPrefix(t, "${{") || !strings.HasSuffix(t, "}}") {
		return "", false
	}
	return strings.CutPrefix(strings.TrimSpace(t[3:len(t)-2]), kind+".")
}

// ParseMiniBatchSize reads mini_batch_size: a count ("10") or a size
// ("100kb", "1 MB", "1024"), as bytes when it has a unit.
func ParseMiniBatchSize(s string) (count int64, bytes bool, err error) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"b", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult, bytes = rest, u.m, true
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 || n > 1<<40/mult {
		return 0, false, fmt.Errorf("mini_batch_size %q is not a positive count (files per mini-batch) or a size such as 100kb or 10mb (rows of a table)", s)
	}
	return n * mult, bytes, nil
}

// prepareParallel validates a parallel step's job and fills defaults: its
// code and environment are the task's, and its command runs the Cumulus
// driver (with the task's program_arguments), which the node's agent
// supplies.
func prepareParallel(j *Job, v *Validation) {
	p := &j.Properties
	const target = "properties"
	spec := p.ParallelSpec
	if spec == nil {
		spec = &ParallelSpec{}
		p.ParallelSpec = spec
	}
	spec.Parallel = nil // read-only
	if (p.Command != "" && !strings.HasPrefix(p.Command, parallelDriverCommand)) || p.Distribution != nil {
		v.Add(CodeValidationError, target+".command", "a parallel step runs task.entry_script: give it in task, not command or distribution")
	}
	t := spec.Task
	if t == nil {
		v.Add(CodeValidationError, target+".task", "a parallel step needs task: {type: run_function, code, entry_script, environment}")
		return
	}
	switch strings.ToLower(t.Type) {
	case "", "run_function", "function":
		t.Type = "run_function"
	default:
		v.Add(CodeValidationError, target+".task.type", "task.type %q is not run_function", t.Type)
	}
	if !strings.HasSuffix(t.EntryScript, ".py") || strings.HasPrefix(t.EntryScript, "/") || strings.Contains("/"+t.EntryScript+"/", "/../") {
		v.Add(CodeValidationError, target+".task.entry_script", "task.entry_script %q must be a .py file in task.code", t.EntryScript)
	}
	if p.CodeID == "" {
		p.CodeID = t.Code
	}
	if p.EnvironmentID == "" {
		p.EnvironmentID = t.Environment
	}
	t.Code, t.Environment = p.CodeID, p.EnvironmentID
	if p.CodeID == "" {
		v.Add(CodeValidationError, target+".task.code", "task.code is required: the folder that holds %s", t.EntryScript)
	}
	for k, val := range t.EnvironmentVariables {
		if p.EnvironmentVariables == nil {
			p.EnvironmentVariables = map[string]string{}
		}
		p.EnvironmentVariables[k] = val
	}
	in, ok := refName(spec.InputData, "inputs")
	if !ok {
		v.Add(CodeValidationError, target+".input_data", "input_data must be ${{inputs.<name>}}, the input to split into mini-batches")
	} else if i, ok := p.Inputs[in]; !ok {
		v.Add(CodeValidationError, target+".input_data", "input_data names input %s, which the step does not have (it has: %s)", in, names(p.Inputs))
	} else if strings.EqualFold(i.JobInputType, "literal") {
		v.Add(CodeValidationError, target+".input_data", "input_data names input %s, a literal; it must be a folder, a file or an mltable", in)
	}
	tabular := false
	if i, ok := p.Inputs[in]; ok {
		tabular = strings.EqualFold(i.JobInputType, "mltable") || strings.EqualFold(i.JobInputType, "uri_file")
	}
	if spec.MiniBatchSize == "" {
		spec.MiniBatchSize = "1"
		if tabular {
			spec.MiniBatchSize = "1mb"
		}
	}
	if _, _, err := ParseMiniBatchSize(string(spec.MiniBatchSize)); err != nil {
		v.Add(CodeValidationError, target+".mini_batch_size", "%s", err)
	}
	if len(spec.PartitionKeys) > 0 && !tabular {
		v.Add(CodeValidationError, target+".partition_keys", "partition_keys apply to a table (an mltable or CSV input); input_data is a folder")
	}
	if spec.MaxConcurrencyPerInstance < 0 || spec.MaxConcurrencyPerInstance > 256 {
		v.Add(CodeValidationError, target+".max_concurrency_per_instance", "max_concurrency_per_instance must be between 1 and 256, got %d", spec.MaxConcurrencyPerInstance)
	}
	for field, x := range map[string]*int32{"error_threshold": spec.ErrorThreshold, "mini_batch_error_threshold": spec.MiniBatchErrorThreshold} {
		if x != nil && *x < -1 {
			v.Add(CodeValidationError, target+"."+field, "%s must be -1 (ignore failures) or more, got %d", field, *x)
		}
	}
	minus1 := int32(-1)
	if spec.ErrorThreshold == nil {
		spec.ErrorThreshold = &minus1
	}
	if spec.MiniBatchErrorThreshold == nil {
		spec.MiniBatchErrorThreshold = &minus1
	}
	switch strings.ToUpper(spec.LoggingLevel) {
	case "":
		spec.LoggingLevel = "INFO"
	case "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL":
		spec.LoggingLevel = strings.ToUpper(spec.LoggingLevel)
	default:
		v.Add(CodeValidationError, target+".logging_level", "logging_level %q is not one of DEBUG, INFO, WARNING", spec.LoggingLevel)
	}
	if spec.RetrySettings == nil {
		spec.RetrySettings = &RetrySettings{}
	}
	rs := spec.RetrySettings
	if rs.MaxRetries == nil {
		n := int32(DefaultMaxRetries)
		rs.MaxRetries = &n
	}
	if rs.Timeout == nil {
		n := int32(DefaultRetryTimeout)
		rs.Timeout = &n
	}
	if *rs.MaxRetries < 0 || *rs.MaxRetries > 100 {
		v.Add(CodeValidationError, target+".retry_settings.max_retries", "retry_settings.max_retries must be between 0 and 100, got %d", *rs.MaxRetries)
	}
	if *rs.Timeout < 1 || *rs.Timeout > maxRetryTimeout {
		v.Add(CodeValidationError, target+".retry_settings.timeout", "retry_settings.timeout must be between 1 and %d seconds, got %d", maxRetryTimeout, *rs.Timeout)
	}
	if t.AppendRowTo != "" {
		out, ok := refName(t.AppendRowTo, "outputs")
		if !ok {
			v.Add(CodeValidationError, target+".task.append_row_to", "task.append_row_to must be ${{outputs.<name>}}")
		} else if _, ok := p.Outputs[out]; !ok {
			v.Add(CodeValidationError, target+".task.append_row_to", "task.append_row_to names output %s, which the step does not have (it has: %s)", out, names(p.Outputs))
		}
	}
	p.Command = parallelDriverCommand
	if t.ProgramArguments != "" {
		p.Command += " " + t.ProgramArguments
	}
}

// ParallelSettings are the step's limits as package parallel takes them
// (filled at submission), with what its program_arguments set of Azure's
// predefined arguments (--error_threshold, --allowed_failed_percent).
func (j *Job) ParallelSettings() parallel.Settings {
	s := parallel.Settings{MaxRetries: DefaultMaxRetries, Timeout: DefaultRetryTimeout * time.Second,
		MiniBatchErrorThreshold: -1, ErrorThreshold: -1, AllowedFailedPercent: 100}
	spec := j.Properties.ParallelSpec
	if spec == nil {
		return s
	}
	if rs := spec.RetrySettings; rs != nil {
		if rs.MaxRetries != nil {
			s.MaxRetries = int(*rs.MaxRetries)
		}
		if rs.Timeout != nil {
			s.Timeout = time.Duration(*rs.Timeout) * time.Second
		}
	}
	if x := spec.MiniBatchErrorThreshold; x != nil {
		s.MiniBatchErrorThreshold = int(*x)
	}
	if x := spec.ErrorThreshold; x != nil {
		s.ErrorThreshold = int(*x)
	}
	if spec.Task != nil {
		args := strings.Fields(spec.Task.ProgramArguments)
		for i := 0; i+1 < len(args); i++ {
			n, err := strconv.Atoi(args[i+1])
			if err != nil {
				continue
			}
			switch args[i] {
			case "--error_threshold":
				s.ErrorThreshold = n
			case "--allowed_failed_percent":
				s.AllowedFailedPercent = min(max(n, 0), 100)
			}
		}
	}
	return s
}

// ParallelInput is the name of the input a parallel step splits.
func (j *Job) ParallelInput() string {
	if spec := j.Properties.ParallelSpec; spec != nil {
		n, _ := refName(spec.InputData, "inputs")
		return n
	}
	return ""
}

// ParallelRows is where a parallel step appends its rows: the output and
// the file's name in it ("" output: the step keeps no rows).
func (j *Job) ParallelRows() (output, file string) {
	spec := j.Properties.ParallelSpec
	if spec == nil || spec.Task == nil || spec.Task.AppendRowTo == "" {
		return "", ""
	}
	out, _ := refName(spec.Task.AppendRowTo, "outputs")
	o := j.Properties.Outputs[out]
	file = DefaultRowsFile
	if strings.EqualFold(o.JobOutputType, "uri_file") {
		if base := path.Base(strings.TrimRight(o.URI, "/")); o.URI != "" && base != "." && base != "/" && !strings.Contains(base, "${{") {
			file = base
		}
	}
	return out, file
}

// ParallelSettingsOf is the settings of a pipeline's parallel step.
func (j *Job) ParallelSettingsOf(step string) parallel.Settings {
	s := j.Properties.Jobs[step]
	if s == nil {
		return (&Job{}).ParallelSettings()
	}
	return (&Job{Properties: s.JobProperties}).ParallelSettings()
}
