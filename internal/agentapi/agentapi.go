// Package agentapi is the protocol between the control plane and the node
// agent: JSON over HTTP(S) under /cumulus/v1/agent. The agent is the same
// binary on every kind of node (local process, container, pod, VM).
//
//	POST /cumulus/v1/agent/register          Bearer <join token>  RegisterRequest → RegisterResponse
//	POST /cumulus/v1/agent/poll              Bearer <node token>  PollRequest → PollResponse (heartbeat + long poll)
//	POST /cumulus/v1/agent/jobs/{uid}/events Bearer <node token>  JobEvent → 204 (idempotent)
//	POST /cumulus/v1/agent/jobs/{uid}/logs?offset=N   raw bytes → LogAck (appended only at offset == stored size)
//	PUT  /cumulus/v1/agent/jobs/{uid}/outputs/{name}  tar.gz of the output folder → 204 ("checkpoint": $CUMULUS_CHECKPOINT_DIR)
//	GET  /cumulus/v1/agent/jobs/{uid}/checkpoint      the checkpoint an earlier attempt left (tar.gz)
//	POST /cumulus/v1/agent/jobs/{uid}/token Bearer <node token>  TokenRequest → TokenResponse (managed identity)
//	POST /cumulus/v1/agent/jobs/{uid}/parallel  Bearer <node token>  ParallelRequest → ParallelResponse (a parallel step's mini-batches)
//	GET  /cumulus/v1/blobs/{sha256}          Bearer <node or user token>  → the blob (code snapshots)
package agentapi

import (
	"math"
	"time"
)

// Path prefixes.
const (
	Prefix     = "/cumulus/v1/agent"
	BlobPrefix = "/cumulus/v1/blobs"
)

// A control plane that serves TLS answers an agent that still calls it
// over plain HTTP (it joined before the server restarted with TLS) on a
// loopback or subnet-bridge address, and tells it, over that connection,
// the certificate to trust and the name to check it for: the agent moves
// to HTTPS at the same address (see the agent's client).
const (
	HeaderServerCertificate = "Cumulus-Server-Certificate" // base64 DER of the server's certificate
	HeaderServerName        = "Cumulus-Server-Name"        // the name it is valid for
)

// GPU is one accelerator a node has: a whole GPU, or a MIG instance of
// one (MIG set: its profile, e.g. "1g.10gb"; Index is then its GPU's index
// and MIGDevice its device number on that GPU).
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	UUID      string `json:"uuid,omitempty"`
	Memory    int64  `json:"memoryMiB,omitempty"`
	MIG       string `json:"mig,omitempty"`
	MIGDevice int    `json:"migDevice,omitempty"`
}

// RegisterRequest is an agent joining. NodeID is set when the provider
// created the node record first (local, docker, kubernetes); an agent
// started by hand leaves it empty and is given one.
type RegisterRequest struct {
	NodeID       string     `json:"nodeId,omitempty"`
	Hostname     string     `json:"hostname"`
	Address      string     `json:"address"` // IP other nodes and the server reach this node at
	GPUs         []GPU      `json:"gpus,omitempty"`
	AgentVersion string     `json:"agentVersion"`
	Jobs         []JobState `json:"jobs,omitempty"` // what it still runs (re-registration)
}

// RegisterResponse gives the agent its identity and timings.
type RegisterResponse struct {
	NodeID            string        `json:"nodeId"`
	NodeToken         string        `json:"nodeToken"`
	HeartbeatInterval time.Duration `json:"heartbeatInterval"` // poll at least this often
	PollTimeout       time.Duration `json:"pollTimeout"`       // the server holds a poll at most this long
	// SSH, when the cluster has an admin account, makes the agent serve
	// SSH for that user (a shell in the node's working environment).
	SSH *SSHConfig `json:"ssh,omitempty"`
	// UsageInterval is how often the agent samples utilization (0: the
	// agent's default).
	UsageInterval time.Duration `json:"usageInterval,omitempty"`
}

// SSHConfig is the node admin account: a public key and/or a bcrypt hash
// of the password (the password itself never reaches the node).
type SSHConfig struct {
	User          string `json:"user"`
	AuthorizedKey string `json:"authorizedKey,omitempty"`
	PasswordHash  string `json:"passwordHash,omitempty"`
}

// PollRequest is a heartbeat: the agent's view of its jobs.
type PollRequest struct {
	NodeID string     `json:"nodeId"`
	Jobs   []JobState `json:"jobs,omitempty"`
	// SSHPort is where the node's SSH server listens (0: none), and
	// SSHSessions how many sessions are open: a node with an open session
	// is busy and is not scaled down.
	SSHPort     int `json:"sshPort,omitempty"`
	SSHSessions int `json:"sshSessions,omitempty"`
	// Usage is the node's latest utilization sample (see usage.go); an
	// agent that does not sample leaves it out.
	Usage *Usage `json:"usage,omitempty"`
}

// PollResponse carries instructions; an empty one means "carry on".
type PollResponse struct {
	Assign *Assignment `json:"assign,omitempty"`
	Cancel []string    `json:"cancel,omitempty"` // job uids to stop (SIGTERM, grace, SIGKILL)
	// StopReasons says why each job in Cancel (or Preempt, when the
	// compute's queue policy stopped it for another job) is stopped, for
	// its log and exit report ("canceled", or the node's preemption, when
	// absent).
	StopReasons map[string]string `json:"stopReasons,omitempty"`
	// Preempt: the node is being preempted; stop these jobs with
	// PreemptGrace between SIGTERM and SIGKILL, save their checkpoints
	// and report them exited.
	Preempt      []string      `json:"preempt,omitempty"`
	PreemptGrace time.Duration `json:"preemptGrace,omitempty"`
	Shutdown     bool          `json:"shutdown,omitempty"` // the node is being removed: stop jobs and exit
	Unknown      bool          `json:"unknown,omitempty"`  // the server has no record of this node: exit
}

// Job phases an agent reports.
const (
	PhaseRunning = "running"
	PhaseExited  = "exited"
)

// JobState is what an agent knows of one job.
type JobState struct {
	UID      string    `json:"uid"`
	Attempt  int       `json:"attempt"`
	Phase    string    `json:"phase"`
	ExitCode int       `json:"exitCode"`
	Reason   string    `json:"reason,omitempty"` // e.g. "timeout after 30s", "canceled", "code download failed: …"
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	// NodeStopped: the job ended because its node's agent was stopped (the
	// machine or pod is going away), not through any fault of the job's.
	NodeStopped bool `json:"nodeStopped,omitempty"`
	// MPIRole is this node's part in an MPI launch (MPIRoleMpirun on node
	// rank 0, MPIRoleLauncher on the others); "" outside one.
	MPIRole string `json:"mpiRole,omitempty"`
	// PortBusy is a port the assignment gave this node's part to listen on
	// that was in use on the node: the part did not start, and the job is
	// started again on other ports.
	PortBusy int `json:"portBusy,omitempty"`
	// EmptyOutputs, in an exit report, names the outputs (DefaultOutput,
	// named ones) the job left empty on this node: the agent uploads
	// none of them, and the server keeps each, with the exit and in the
	// same write, as an empty upload of this attempt and rank, as if it
	// had been uploaded (most jobs leave theirs empty: a request, and a
	// file and folder on the server, each saved).
	EmptyOutputs []string `json:"emptyOutputs,omitempty"`
}

// Parts of an MPI launch (JobState.MPIRole).
const (
	// MPIRoleMpirun: node rank 0 runs mpirun over every node of the job;
	// its end is the job's end.
	MPIRoleMpirun = "mpirun"
	// MPIRoleLauncher: the node runs the launcher that starts node 0's
	// MPI daemon there. It ends when told to (node 0's mpirun ended, or
	// the job is stopped), or when that daemon failed; ending on its own
	// with 0 while mpirun runs means mpirun lost the node.
	MPIRoleLauncher = "launcher"
)

// ReasonNodeStopped is the exit reason of a job whose agent was stopped.
const ReasonNodeStopped = "the node agent was stopped"

// JobEvent is a phase change of one job on one node.
type JobEvent = JobState

// Assignment tells an agent to run a job.
type Assignment struct {
	UID     string `json:"uid"`
	Name    string `json:"name"` // the job's name in its workspace
	Attempt int    `json:"attempt"`
	Command string `json:"command"` // run with /bin/sh -c
	// Owner is who submitted the job: a node empties its jobs' private
	// /tmp and /dev/shm between jobs of different owners.
	Owner    string            `json:"owner,omitempty"`
	CodeBlob string            `json:"codeBlob,omitempty"` // sha256 of a tar.gz to unpack into the working dir
	Image    string            `json:"image,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Timeout  time.Duration     `json:"timeout,omitempty"` // 0: none
	// CostLimit, when set, is how long from now the job may hold its
	// nodes before its cost reaches its limit: the agent then stops it
	// (SIGTERM, grace, SIGKILL) with CostLimitReason.
	CostLimit       time.Duration     `json:"costLimit,omitempty"`
	CostLimitReason string            `json:"costLimitReason,omitempty"`
	Grace           time.Duration     `json:"grace"`             // SIGTERM → SIGKILL
	Outputs         []string          `json:"outputs,omitempty"` // named outputs: each gets a folder and AZUREML_OUTPUT_<name>
	Inputs          map[string]string `json:"inputs,omitempty"`  // folder inputs: name → blob sha256, unpacked to a folder named by AZUREML_INPUT_<name>
	GPUs            []int             `json:"gpus,omitempty"`
	// ShmSize is the size of the job's /dev/shm in bytes (resources.shmSize;
	// 0: api.DefaultShmSize).
	ShmSize       int64         `json:"shmSize,omitempty"` // device indexes for CUDA_VISIBLE_DEVICES
	InstanceIndex int           `json:"instanceIndex"`     // this node's rank among the job's nodes
	NodeIPs       []string      `json:"nodeIps,omitempty"` // every node of the job, by rank
	Distribution  *Distribution `json:"distribution,omitempty"`
	// Checkpoint says an earlier attempt left a checkpoint: restore it into
	// $CUMULUS_CHECKPOINT_DIR before the command starts.
	Checkpoint bool `json:"checkpoint,omitempty"`
	// Identity says the job's cluster has a managed identity: the agent
	// serves tokens for it to the job (MSI_ENDPOINT, MSI_SECRET) by asking
	// POST …/jobs/{uid}/token. DefaultClientID picks the identity a
	// request without a client id gets.
	Identity        bool   `json:"identity,omitempty"`
	DefaultClientID string `json:"defaultClientId,omitempty"`
	// Parallel makes the job a parallel step's part on this node.
	Parallel *Parallel `json:"parallel,omitempty"`
	// FileInputs are the inputs (of Inputs) that are one file: their
	// AZUREML_INPUT_<name> names the file, not its folder.
	FileInputs []string `json:"fileInputs,omitempty"`
	// CodeFiles says the code is a folder of the workspace's blob store:
	// the agent lists it (GET …/jobs/{uid}/code/files) and downloads
	// each file (GET BlobPrefix/{digest}) into the working directory.
	CodeFiles bool `json:"codeFiles,omitempty"`
	// DataInputs are inputs in the blob store, listed at
	// …/jobs/{uid}/inputs/{name}/files and downloaded file by file into
	// inputs/<name>; AZUREML_INPUT_<name> names that folder, or for a
	// File input the one file in it.
	DataInputs map[string]DataInput `json:"dataInputs,omitempty"`
	// Notes are lines the agent writes at the top of the job's log (what
	// the server decided that the job's author should know).
	Notes []string `json:"notes,omitempty"`
}

// DataInput is one input the agent downloads from the blob store.
type DataInput struct {
	File bool `json:"file,omitempty"` // a uri_file: one file
}

// FileList is what a code or data input holds: each file by its path
// under the folder (forward slashes), its content's sha256 and size.
type FileList struct {
	Files []ListedFile `json:"files"`
}

// ListedFile is one file of a FileList.
type ListedFile struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// TokenRequest asks for a token of one of the job's cluster identities.
type TokenRequest struct {
	Resource string `json:"resource"`
	ClientID string `json:"clientId,omitempty"`
}

// TokenResponse is a managed-identity token in the shape Azure's endpoints
// answer (expires_on in Unix seconds).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	ExpiresOn   string `json:"expires_on"`
	Resource    string `json:"resource"`
	TokenType   string `json:"token_type"`
	ClientID    string `json:"client_id"`
}

// CheckpointOutput is the output name under which $CUMULUS_CHECKPOINT_DIR
// is saved at the end of every attempt.
const CheckpointOutput = "checkpoint"

// DefaultOutput is the name a job's main outputs folder (./outputs in its
// working directory) is uploaded under.
const DefaultOutput = "default"

// Distribution is how a multi-process job is wired: the agent starts
// ProcessesPerNode processes and gives each the environment its framework
// expects (see package distrib).
type Distribution struct {
	Type             string `json:"type"` // mpi, pytorch, tensorflow
	ProcessesPerNode int    `json:"processesPerNode"`
	MasterPort       int    `json:"masterPort"` // rank 0 listens here; TensorFlow task i at MasterPort+1+i
	WorkerCount      int    `json:"workerCount,omitempty"`
	ParameterServers int    `json:"parameterServers,omitempty"`
	// LaunchToken, for MPI jobs, is the job attempt's secret that node 0's
	// mpirun shows the other nodes' launchers (distrib.LauncherPort) to
	// start its daemons there.
	LaunchToken string `json:"launchToken,omitempty"`
}

// LogAck says how many bytes of a job's log on this node the server holds.
// LogFull means the log reached the server's limit: the agent sends no
// more of it.
type LogAck struct {
	Size int64 `json:"size"`
}

// Parallel is what a parallel step's node needs beyond its command (which
// runs the driver, ParallelDriverEnv): the agent writes the driver there
// and serves it the step's mini-batches through its local endpoint
// (ParallelEndpointEnv, ParallelSecretEnv), relaying to
// POST …/jobs/{uid}/parallel.
type Parallel struct {
	EntryScript string        `json:"entryScript"`
	Input       string        `json:"input"`         // the input split into mini-batches
	InputType   string        `json:"inputType"`     // uri_folder (one item per file), uri_file or mltable (rows)
	MiniBatch   string        `json:"miniBatchSize"` // files per mini-batch, or a size of rows ("100kb")
	Partition   []string      `json:"partitionKeys,omitempty"`
	Workers     int           `json:"workers"` // worker processes on each node
	Timeout     time.Duration `json:"timeout"` // one run(mini_batch)
	LogLevel    string        `json:"logLevel"`
	RowsDir     string        `json:"rowsOutput,omitempty"` // the output the rows go to ("": none)
	RowsFile    string        `json:"rowsFile,omitempty"`
}

// Environment of a parallel step's driver.
const (
	ParallelDriverEnv   = "CUMULUS_PARALLEL_DRIVER"
	ParallelEndpointEnv = "CUMULUS_PARALLEL_ENDPOINT"
	ParallelSecretEnv   = "CUMULUS_PARALLEL_SECRET"
	ParallelConfigEnv   = "CUMULUS_PARALLEL_CONFIG"
)

// ParallelRequest is a node's driver reporting the mini-batches it ran and
// asking for more (POST …/jobs/{uid}/parallel, node token). The agent
// fills Attempt.
type ParallelRequest struct {
	Attempt int           `json:"attempt"`
	Plan    *ParallelPlan `json:"plan,omitempty"`
	Results []BatchResult `json:"results,omitempty"`
	// Running are the mini-batches still running on this node: their
	// leases are renewed.
	Running []int `json:"running,omitempty"`
	Want    int   `json:"want"`
	// Progress asks for a line on where the step stands (it counts every
	// mini-batch: the driver asks every few seconds, not every time).
	Progress bool `json:"progress,omitempty"`
}

// ParallelPlan is how a node split input_data: the items of each
// mini-batch (every node splits the same data the same way; Digest says
// which split it is).
type ParallelPlan struct {
	Items  []int  `json:"items"`
	Digest string `json:"digest"`
}

// BatchResult is how one run of a mini-batch ended: its rows, or why it
// failed with the items it held.
type BatchResult struct {
	Index int      `json:"index"`
	OK    bool     `json:"ok"`
	Rows  []string `json:"rows,omitempty"`
	Error string   `json:"error,omitempty"`
	Items []string `json:"items,omitempty"`
}

// ParallelResponse hands out mini-batches, or says the step is over.
type ParallelResponse struct {
	Batches []LeasedBatch `json:"batches,omitempty"`
	// Finished: every mini-batch has ended and the step succeeded; Failed:
	// the step failed (why). Either way the driver stops.
	Finished bool   `json:"finished,omitempty"`
	Failed   string `json:"failed,omitempty"`
	// Progress is a line on where the step stands, for the log: when
	// asked, and with Finished or Failed.
	Progress string `json:"progress,omitempty"`
}

// LeasedBatch is a mini-batch handed to a node, and which try it is.
type LeasedBatch struct {
	Index int `json:"index"`
	Try   int `json:"try"`
}

// LogFull is LogAck.Size of a log at its limit: larger than any offset, so
// that an agent sends nothing more of it.
const LogFull int64 = math.MaxInt64
