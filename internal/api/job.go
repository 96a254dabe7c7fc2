package api

import (
	"time"
)

// Job is the JobBase envelope of a command job.
type Job struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	SystemData *SystemData   `json:"systemData,omitempty"`
	Properties JobProperties `json:"properties"`
}

// JobProperties is a CommandJob's properties, plus read-only Cumulus
// extensions (attempts, history, nodes) that Azure clients ignore.
type JobProperties struct {
	JobType              string               `json:"jobType"`
	Command              string               `json:"command,omitempty"`
	CodeID               string               `json:"codeId,omitempty"`
	EnvironmentID        string               `json:"environmentId,omitempty"`
	ComputeID            string               `json:"computeId,omitempty"`
	EnvironmentVariables map[string]string    `json:"environmentVariables,omitempty"`
	Inputs               map[string]JobInput  `json:"inputs,omitempty"`
	Outputs              map[string]JobOutput `json:"outputs,omitempty"`
	Resources            *JobResources        `json:"resources,omitempty"`
	Distribution         *Distribution        `json:"distribution,omitempty"`
	Limits               *JobLimits           `json:"limits,omitempty"`
	QueueSettings        *QueueSettings       `json:"queueSettings,omitempty"`
	Identity             map[string]any       `json:"identity,omitempty"`
	DisplayName          string               `json:"displayName,omitempty"`
	ExperimentName       string               `json:"experimentName,omitempty"`
	Description          string               `json:"description,omitempty"`
	Tags                 map[string]string    `json:"tags,omitempty"`
	Properties           map[string]string    `json:"properties,omitempty"`
	IsArchived           bool                 `json:"isArchived"`
	Status               string               `json:"status,omitempty"`
	// Services are the job's endpoints, read-only and filled when the job
	// is answered (azure-ai-ml requires the map).
	Services map[string]JobService `json:"services,omitempty"`

	// SweepJob's (jobType Sweep; see sweep.go).
	Trial             *TrialComponent         `json:"trial,omitempty"`
	SearchSpace       map[string]any          `json:"searchSpace,omitempty"`
	SamplingAlgorithm *SamplingAlgorithm      `json:"samplingAlgorithm,omitempty"`
	Objective         *Objective              `json:"objective,omitempty"`
	EarlyTermination  *EarlyTerminationPolicy `json:"earlyTermination,omitempty"`

	// PipelineJob's (jobType Pipeline; see pipeline.go): its steps, each a
	// job's properties, and its settings.
	Jobs        map[string]*PipelineStep `json:"jobs,omitempty"`
	Settings    *PipelineSettings        `json:"settings,omitempty"`
	SourceJobID string                   `json:"sourceJobId,omitempty"`
	// A parallel step's (jobType Parallel, a pipeline's child; see
	// parallel.go).
	*ParallelSpec

	// Cumulus extensions, read-only.
	Priority int    `json:"priority,omitempty"`         // settable: higher runs first
	Image    string `json:"environmentImage,omitempty"` // the image environmentId resolved to at submit
	// MinRuntime (settable, ISO-8601) is how long each attempt runs at
	// least before a queue policy with preemption may stop it for another
	// job; "" takes its compute's.
	MinRuntime string `json:"minRuntime,omitempty"`
	// FairShareGroup is the group whose share the job counts against on a
	// fair-share compute (its submitter, or the value of the grouping
	// tag); set when it is submitted and when the compute's grouping
	// changes.
	FairShareGroup *string `json:"fairShareGroup,omitempty"`
	// EnvironmentNote says how environmentId was resolved when that is
	// worth a line at the top of the job's log (a curated environment
	// name run in the node's own environment).
	EnvironmentNote string `json:"environmentNote,omitempty"`
	// CodeBlobPath is where codeId's files are in the blob store, resolved
	// at submit (nil for none, and for a code snapshot the CLI uploaded).
	CodeBlobPath  *BlobPath `json:"codeBlobPath,omitempty"`
	StatusMessage string    `json:"statusMessage,omitempty"`
	// Waiting is why a queued job waits when the reason is its own (quota,
	// the machine's GPUs: which jobs wait for them is decided job by job);
	// the server words it as the status message. Other reasons are its
	// compute's (Blocked).
	Waiting *Block         `json:"waitingFor,omitempty"`
	History []StatusChange `json:"statusHistory,omitempty"`
	Cost    *JobCost       `json:"cost,omitempty"` // read-only: what it has cost so far
	// Metrics is the latest value of each metric the job logged the
	// MLflow way (read-only; in a single job's GET, not in lists).
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	Attempts  []Attempt          `json:"attempts,omitempty"`
	StartTime *time.Time         `json:"startTime,omitempty"`
	EndTime   *time.Time         `json:"endTime,omitempty"`
	// A sweep's progress, and a trial's sweep and parameters.
	Sweep         *SweepStatus   `json:"sweep,omitempty"`
	ParentJobName string         `json:"parentJobName,omitempty"`
	Parameters    map[string]any `json:"parameters,omitempty"`
	// A pipeline's steps as they stand, and a step's name in its pipeline.
	Pipeline     *PipelineStatus `json:"pipeline,omitempty"`
	PipelineStep string          `json:"pipelineStep,omitempty"`
}

// JobService is one of a job's endpoints (Azure's JobService).
type JobService struct {
	JobServiceType string `json:"jobServiceType"`
	Endpoint       string `json:"endpoint,omitempty"`
	Status         string `json:"status,omitempty"`
}

// JobInput is a job input: a uri_folder/uri_file or a literal.
type JobInput struct {
	JobInputType string `json:"jobInputType"`
	URI          string `json:"uri,omitempty"`
	Mode         string `json:"mode,omitempty"`
	Value        string `json:"value,omitempty"`
	Description  string `json:"description,omitempty"`
	// BlobPath is where the input is in the workspace's blob store, as
	// its uri resolved at submission (read-only, a Cumulus extension).
	BlobPath *BlobPath `json:"blobPath,omitempty"`
}

// JobOutput is a job output folder.
type JobOutput struct {
	JobOutputType string `json:"jobOutputType"`
	URI           string `json:"uri,omitempty"`
	Mode          string `json:"mode,omitempty"`
	Description   string `json:"description,omitempty"`
	// BlobPath is where the output is uploaded when the job ends
	// (read-only, a Cumulus extension).
	BlobPath *BlobPath `json:"blobPath,omitempty"`
}

// JobResources is where and on how many nodes a job runs.
type JobResources struct {
	InstanceCount int32             `json:"instanceCount,omitempty"`
	InstanceType  string            `json:"instanceType,omitempty"`
	ShmSize       string            `json:"shmSize,omitempty"`
	DockerArgs    string            `json:"dockerArgs,omitempty"`
	Properties    map[string]string `json:"properties,omitempty"`
}

// Distribution is the distributed-training wiring (mpi, pytorch, tensorflow).
type Distribution struct {
	DistributionType        string `json:"distributionType"`
	ProcessCountPerInstance int32  `json:"processCountPerInstance,omitempty"`
	WorkerCount             int32  `json:"workerCount,omitempty"`
	ParameterServerCount    int32  `json:"parameterServerCount,omitempty"`
}

// JobLimits bounds a job's run time.
type JobLimits struct {
	JobLimitsType string `json:"jobLimitsType"`
	Timeout       string `json:"timeout,omitempty"`
	// MaxCost (a Cumulus extension) stops the job, which fails with
	// CostLimitExceeded, when its nodes' billed time reaches this amount
	// in the server's currency.
	MaxCost *float64 `json:"maxCost,omitempty"`
	// SweepJobLimits' (jobLimitsType Sweep): timeout is then the sweep's.
	MaxConcurrentTrials int32  `json:"maxConcurrentTrials,omitempty"`
	MaxTotalTrials      int32  `json:"maxTotalTrials,omitempty"`
	TrialTimeout        string `json:"trialTimeout,omitempty"`
}

// CostLimitExceeded begins the reason of a job stopped at its maxCost.
const CostLimitExceeded = "CostLimitExceeded"

// JobCost is what a job has cost so far (read-only, a Cumulus extension):
// its attempts' nodes from assignment to end, at the server's prices.
type JobCost struct {
	Amount    float64  `json:"amount"`
	Currency  string   `json:"currency"`
	NodeHours float64  `json:"nodeHours"`
	MaxCost   *float64 `json:"maxCost,omitempty"`
}

// MaxCost is the job's cost limit, 0 for none.
func (j *Job) MaxCost() float64 {
	if l := j.Properties.Limits; l != nil && l.MaxCost != nil {
		return *l.MaxCost
	}
	return 0
}

// QueueSettings is the job tier.
type QueueSettings struct {
	JobTier string `json:"jobTier,omitempty"`
}

// StatusChange is one timestamped transition, with a reason off the happy path.
type StatusChange struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
}

// Attempt is one run of a job on its nodes.
type Attempt struct {
	Number   int        `json:"attempt"`
	Nodes    []string   `json:"nodes"`
	Assigned *time.Time `json:"assigned,omitempty"` // its nodes were given to it (the start of its cost)
	Started  *time.Time `json:"started,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	ExitCode *int       `json:"exitCode,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// Job statuses, as Azure's.
const (
	JobNotStarted      = "NotStarted"
	JobQueued          = "Queued"
	JobPreparing       = "Preparing"
	JobStarting        = "Starting"
	JobRunning         = "Running"
	JobFinalizing      = "Finalizing"
	JobCompleted       = "Completed"
	JobFailed          = "Failed"
	JobCancelRequested = "CancelRequested"
	JobCanceled        = "Canceled"

	JobTypeCommand = "Command"
)

// JobTerminal reports whether a status is final.
func JobTerminal(status string) bool {
	return status == JobCompleted || status == JobFailed || status == JobCanceled
}

// JobStatuses lists every status, for filter validation.
var JobStatuses = []string{JobNotStarted, JobQueued, JobPreparing, JobStarting, JobRunning, JobFinalizing,
	JobCompleted, JobFailed, JobCancelRequested, JobCanceled}

// InstanceCount is the number of nodes a job needs (at least 1).
func (j *Job) InstanceCount() int {
	if r := j.Properties.Resources; r != nil && r.InstanceCount > 0 {
		return int(r.InstanceCount)
	}
	return 1
}

// Timeout is the job's run-time limit, 0 for none.
func (j *Job) Timeout() time.Duration {
	if l := j.Properties.Limits; l != nil && l.Timeout != "" {
		d, _ := ParseDuration(l.Timeout)
		return d
	}
	return 0
}

// SetStatus records a transition with its time and reason.
func (j *Job) SetStatus(status string, now time.Time, reason string) {
	if j.Properties.Status == status && reason == "" {
		return
	}
	j.Properties.Status = status
	j.Properties.StatusMessage = reason
	j.Properties.Waiting = nil
	j.Properties.History = append(j.Properties.History, StatusChange{Status: status, Time: now, Reason: reason})
	if JobTerminal(status) {
		j.Properties.EndTime = &now
	}
}

// LogChunk is a piece of a job's log (GET …/jobs/{name}/logs, a Cumulus
// extension): Content holds the bytes from Offset; Size is the log's size.
type LogChunk struct {
	Attempt int    `json:"attempt"`
	Rank    int    `json:"rank"`
	Offset  int64  `json:"offset"`
	Size    int64  `json:"size"`
	Content string `json:"content"`
	Status  string `json:"status"`
	Ranks   []int  `json:"ranks"`
}

// QuotaWaitPrefix starts the status message of a queued job that waits
// for quota.
const QuotaWaitPrefix = "waiting for quota: "

// BudgetWaitPrefix begins the status message of a queued job held back
// because a budget of its compute is spent.
const BudgetWaitPrefix = "waiting for budget: "
