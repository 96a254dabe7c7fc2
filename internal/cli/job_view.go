package cli

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// JobView is what `job show` and `job list -o json|yaml` print: the az ml
// command-job entity (snake_case keys, the same names as job.yml), with
// Cumulus's read-only state (attempts, status history, cost).
type JobView struct {
	Name                 string            `json:"name"`
	DisplayName          string            `json:"display_name,omitempty"`
	Type                 string            `json:"type"`
	Status               string            `json:"status"`
	StatusMessage        string            `json:"status_message,omitempty"`
	Command              string            `json:"command,omitempty"`
	Code                 string            `json:"code,omitempty"`
	Environment          string            `json:"environment,omitempty"`
	EnvironmentImage     string            `json:"environment_image,omitempty"`
	EnvironmentNote      string            `json:"environment_note,omitempty"`
	Compute              string            `json:"compute"`
	Resources            *jobResourcesView `json:"resources,omitempty"`
	Distribution         *distributionView `json:"distribution,omitempty"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	Limits               *jobLimitsView    `json:"limits,omitempty"`
	Inputs               map[string]any    `json:"inputs,omitempty"`
	Outputs              map[string]any    `json:"outputs,omitempty"`
	ExperimentName       string            `json:"experiment_name,omitempty"`
	Description          string            `json:"description,omitempty"`
	Tags                 map[string]string `json:"tags,omitempty"`
	Priority             int               `json:"priority,omitempty"`
	MinRuntime           string            `json:"min_runtime,omitempty"`
	// FairShareGroup is the group whose share the job counts against on a
	// fair-share compute.
	FairShareGroup  *string          `json:"fair_share_group,omitempty"`
	ID              string           `json:"id"`
	CreationContext *creationContext `json:"creation_context,omitempty"`
	StartTime       *time.Time       `json:"start_time,omitempty"`
	EndTime         *time.Time       `json:"end_time,omitempty"`
	Cost            *jobCostView     `json:"cost,omitempty"`
	Attempts        []attemptView    `json:"attempts,omitempty"`
	StatusHistory   []statusView     `json:"status_history,omitempty"`
	Services        map[string]any   `json:"services,omitempty"`
	// What the job logged the MLflow way; a sweep's and a trial's fields
	// (job_sweep_view.go).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	*SweepView
	// A pipeline's steps, and a parallel step's settings and progress
	// (job_pipeline_view.go).
	*PipelineView
	Parallel *ParallelView `json:"parallel,omitempty"`
}

type jobResourcesView struct {
	InstanceCount int32  `json:"instance_count"`
	InstanceType  string `json:"instance_type,omitempty"`
	ShmSize       string `json:"shm_size,omitempty"`
}

type distributionView struct {
	Type                    string `json:"type"`
	ProcessCountPerInstance int32  `json:"process_count_per_instance,omitempty"`
	WorkerCount             int32  `json:"worker_count,omitempty"`
	ParameterServerCount    int32  `json:"parameter_server_count,omitempty"`
}

type jobLimitsView struct {
	Timeout int64    `json:"timeout,omitempty"` // seconds
	MaxCost *float64 `json:"max_cost,omitempty"`
	// A sweep's.
	MaxTotalTrials      int32 `json:"max_total_trials,omitempty"`
	MaxConcurrentTrials int32 `json:"max_concurrent_trials,omitempty"`
	TrialTimeout        int64 `json:"trial_timeout,omitempty"` // seconds
}

type creationContext struct {
	CreatedAt     *time.Time `json:"created_at,omitempty"`
	CreatedBy     string     `json:"created_by,omitempty"`
	CreatedByType string     `json:"created_by_type,omitempty"`
}

type jobCostView struct {
	Amount    float64  `json:"amount"`
	Currency  string   `json:"currency"`
	NodeHours float64  `json:"node_hours"`
	MaxCost   *float64 `json:"max_cost,omitempty"`
}

type attemptView struct {
	Attempt  int        `json:"attempt"`
	Nodes    []string   `json:"nodes"`
	Assigned *time.Time `json:"assigned,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

type statusView struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
}

// jobFromARM converts a REST job to the entity `az ml job show` prints;
// server is the URL of the studio, for services.Studio.endpoint.
func jobFromARM(j api.Job, server string) JobView {
	p := j.Properties
	v := JobView{Name: j.Name, DisplayName: p.DisplayName, Type: strings.ToLower(p.JobType), Status: p.Status, StatusMessage: p.StatusMessage,
		Command: p.Command, Environment: p.EnvironmentID, EnvironmentImage: p.Image, EnvironmentNote: p.EnvironmentNote, EnvironmentVariables: p.EnvironmentVariables,
		ExperimentName: p.ExperimentName, Description: p.Description, Tags: p.Tags, Priority: p.Priority, MinRuntime: goDuration(p.MinRuntime), FairShareGroup: p.FairShareGroup, ID: j.ID,
		StartTime: p.StartTime, EndTime: p.EndTime}
	if v.Type == "" {
		v.Type = "command"
	}
	if v.DisplayName == "" { // a job sent without one (an SDK's) is shown by its name, as Azure does
		v.DisplayName = j.Name
	}
	if p.CodeID != "" {
		v.Code = "azureml:" + p.CodeID
	}
	if strings.HasPrefix(v.Environment, "image:") {
		v.Environment = "" // an inline image: environment_image says it
	}
	if p.ComputeID != "" {
		v.Compute = "azureml:" + p.ComputeID[strings.LastIndex(p.ComputeID, "/")+1:]
	}
	v.Resources = &jobResourcesView{InstanceCount: int32(j.InstanceCount())}
	if r := p.Resources; r != nil {
		v.Resources.InstanceType, v.Resources.ShmSize = r.InstanceType, r.ShmSize
	}
	if d := p.Distribution; d != nil {
		v.Distribution = &distributionView{Type: strings.ToLower(d.DistributionType), ProcessCountPerInstance: d.ProcessCountPerInstance,
			WorkerCount: d.WorkerCount, ParameterServerCount: d.ParameterServerCount}
	}
	if l := p.Limits; l != nil {
		v.Limits = &jobLimitsView{MaxCost: l.MaxCost}
		if d, err := api.ParseDuration(l.Timeout); err == nil && l.Timeout != "" {
			v.Limits.Timeout = int64(d / time.Second)
		}
	}
	for k, in := range p.Inputs {
		if v.Inputs == nil {
			v.Inputs = map[string]any{}
		}
		if in.JobInputType == "literal" {
			v.Inputs[k] = in.Value
			continue
		}
		v.Inputs[k] = dataView(in.JobInputType, in.URI, in.Mode, in.BlobPath)
	}
	for k, o := range p.Outputs {
		if v.Outputs == nil {
			v.Outputs = map[string]any{}
		}
		v.Outputs[k] = dataView(o.JobOutputType, o.URI, o.Mode, o.BlobPath)
	}
	if sd := j.SystemData; sd != nil {
		v.CreationContext = &creationContext{CreatedAt: sd.CreatedAt, CreatedBy: sd.CreatedBy, CreatedByType: sd.CreatedByType}
	}
	if c := p.Cost; c != nil {
		v.Cost = &jobCostView{Amount: c.Amount, Currency: c.Currency, NodeHours: c.NodeHours, MaxCost: c.MaxCost}
	}
	for _, a := range p.Attempts {
		v.Attempts = append(v.Attempts, attemptView{Attempt: a.Number, Nodes: a.Nodes, Assigned: a.Assigned, Started: a.Started,
			Ended: a.Ended, ExitCode: a.ExitCode, Reason: a.Reason})
	}
	for _, h := range p.History {
		v.StatusHistory = append(v.StatusHistory, statusView(h))
	}
	if server != "" {
		v.Services = map[string]any{"Studio": map[string]string{"type": "Studio", "endpoint": studioJobURL(server, j.Name)}}
	}
	v.Metrics = p.Metrics
	v.SweepView = sweepViewOf(j, v.Limits)
	v.PipelineView = pipelineViewOf(j)
	v.Parallel = parallelViewOf(j)
	if j.IsPipeline() {
		v.Resources = nil
	}
	return v
}

// studioJobURL is the studio page of a job.
func studioJobURL(server, name string) string {
	return strings.TrimSuffix(server, "/") + "/#/jobs/" + url.PathEscape(name)
}

// created is when a job was submitted: its creation time, else its first
// status change.
func created(j api.Job) time.Time {
	if sd := j.SystemData; sd != nil && sd.CreatedAt != nil {
		return *sd.CreatedAt
	}
	if h := j.Properties.History; len(h) > 0 {
		return h[0].Time
	}
	return time.Time{}
}

// newestFirst sorts jobs by submission, the newest first (then by name).
func newestFirst(jobs []api.Job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		ta, tb := created(jobs[a]), created(jobs[b])
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
		return jobs[a].Name < jobs[b].Name
	})
}

// dataView is an input or output as job.yml writes it, with where it is
// in the blob store (datastore_path) when that is not what path says.
func dataView(typ, uri, mode string, b *api.BlobPath) map[string]string {
	v := map[string]string{"type": typ, "path": uri, "mode": mode}
	if b != nil && b.URI() != "" && b.URI() != uri {
		v["datastore_path"] = b.URI()
	}
	return v
}
