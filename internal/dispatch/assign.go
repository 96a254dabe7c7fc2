package dispatch

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/distrib"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// JobGrace is the time between SIGTERM and SIGKILL when an agent stops a
// job (cancel, timeout, shutdown).
const JobGrace = 10 * time.Second

// Work is what an assignment needs beyond the job and the node: read from
// the store and the output files by the caller.
type Work struct {
	// NodeIPs is the address of each of the job's nodes, by rank ("" for a
	// node the store no longer has).
	NodeIPs []string
	// Checkpoint: an earlier attempt of the job saved a checkpoint.
	Checkpoint bool
	// Identity: the job's compute has a managed identity this server
	// issues tokens for; DefaultClientID is the one a job gets by default.
	Identity        bool
	DefaultClientID string
	// LaunchToken is the MPI launch secret of the job's attempt.
	LaunchToken string
	// TrackingToken is the job's bearer token for its MLflow run
	// (MLFLOW_TRACKING_TOKEN); "" for none.
	TrackingToken string
	// CostLimit is how long the job may still hold its nodes before its
	// maxCost is reached (with the reason to stop it with); 0: no limit.
	CostLimit       time.Duration
	CostLimitReason string
}

// Assignment is what node n needs to run its part of job j.
func Assignment(j store.Job, n store.Node, w Work) agentapi.Assignment {
	p := j.Doc.Properties
	env, inputs := environment(j)
	a := agentapi.Assignment{UID: j.UID, Name: j.Doc.Name, Attempt: j.Attempt, Command: expandBindings(p.Command, p),
		CodeBlob: codeBlob(p), CodeFiles: p.CodeBlobPath != nil, DataInputs: dataInputs(p), Notes: jobNotes(p),
		Image: p.Image, Inputs: inputs, Env: env, Timeout: j.Doc.Timeout(), Grace: JobGrace,
		Outputs: outputNames(p), GPUs: jobGPUs(n), InstanceIndex: slices.Index(j.Nodes, n.ID), NodeIPs: w.NodeIPs,
		Checkpoint: w.Checkpoint, CostLimit: w.CostLimit, CostLimitReason: w.CostLimitReason}
	if sd := j.Doc.SystemData; sd != nil {
		a.Owner = sd.CreatedBy
	}
	if w.Identity {
		a.Identity, a.DefaultClientID = true, w.DefaultClientID
	}
	a.Parallel = parallelOf(j.Doc, n)
	for k, in := range p.Inputs {
		if _, isBlob := inputs[k]; isBlob && strings.EqualFold(in.JobInputType, "uri_file") {
			a.FileInputs = append(a.FileInputs, k)
		}
	}
	slices.Sort(a.FileInputs)
	if w.TrackingToken != "" {
		a.Env[agentapi.TrackingTokenEnv] = w.TrackingToken
	}
	if d := p.Distribution; d != nil {
		a.Distribution = &agentapi.Distribution{Type: strings.ToLower(d.DistributionType), ProcessesPerNode: int(d.ProcessCountPerInstance),
			MasterPort: distrib.MasterPort(j.UID, j.Attempt, distrib.PortBlock(j.Doc.InstanceCount(), int(d.ProcessCountPerInstance))), WorkerCount: int(d.WorkerCount), ParameterServers: int(d.ParameterServerCount),
			LaunchToken: w.LaunchToken}
	}
	if r := p.Resources; r != nil && r.ShmSize != "" {
		a.ShmSize, _ = api.ParseShmSize(r.ShmSize) // checked at submit
	}
	return a
}

// environment is the job's environment variables plus what Azure ML sets
// (AZUREML_RUN_ID, AZUREML_INPUT_<name> for literal and URI inputs), and
// the folder inputs the agent unpacks from blobs (name → digest).
func environment(j store.Job) (env, blobs map[string]string) {
	p := j.Doc.Properties
	env = maps.Clone(p.EnvironmentVariables)
	if env == nil {
		env = map[string]string{}
	}
	blobs = map[string]string{}
	for k, in := range p.Inputs {
		switch digest, isBlob := strings.CutPrefix(in.URI, api.BlobURIScheme); {
		case strings.EqualFold(in.JobInputType, "literal"):
			env["AZUREML_INPUT_"+k] = in.Value
		case in.BlobPath != nil:
			// the agent downloads it and sets AZUREML_INPUT_<name>
		case isBlob:
			blobs[k] = digest // the agent unpacks it and sets AZUREML_INPUT_<name>
		default:
			env["AZUREML_INPUT_"+k] = in.URI
		}
	}
	env["AZUREML_RUN_ID"] = j.Doc.Name
	env["AZUREML_EXPERIMENT_NAME"] = p.ExperimentName
	return env, blobs
}

// outputNames are the job's named outputs, sorted.
func outputNames(p api.JobProperties) []string {
	var out []string
	for k := range p.Outputs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// codeBlob is the digest of a job's code snapshot that the CLI uploaded:
// the last segment of its code id ("" for none, and for code in the blob
// store, which the agent downloads file by file).
func codeBlob(p api.JobProperties) string {
	if p.CodeID == "" || p.CodeBlobPath != nil {
		return ""
	}
	return p.CodeID[strings.LastIndex(p.CodeID, "/")+1:]
}

// dataInputs are the job's inputs in the blob store.
func dataInputs(p api.JobProperties) map[string]agentapi.DataInput {
	var out map[string]agentapi.DataInput
	for k, in := range p.Inputs {
		if in.BlobPath == nil {
			continue
		}
		if out == nil {
			out = map[string]agentapi.DataInput{}
		}
		out[k] = agentapi.DataInput{File: in.BlobPath.File}
	}
	return out
}

// jobNotes are what the agent writes at the top of the job's log.
func jobNotes(p api.JobProperties) []string {
	if p.EnvironmentNote == "" {
		return nil
	}
	return []string{p.EnvironmentNote}
}

// jobGPUs are the GPUs a node gives a job: those its VM size has, no more
// (an agent may report more devices than the size it stands for).
func jobGPUs(n store.Node) []int {
	if size, ok := catalog.Lookup(n.VMSize); ok && len(n.GPUs) > size.GPUs {
		return n.GPUs[:size.GPUs]
	}
	return n.GPUs
}

// expandBindings turns Azure's ${{inputs.x}} and ${{outputs.y}} into the
// environment variables the node sets (literal inputs become their value).
func expandBindings(cmd string, p api.JobProperties) string {
	var b strings.Builder
	for {
		i := strings.Index(cmd, "${{")
		if i < 0 {
			b.WriteString(cmd)
			return b.String()
		}
		j := strings.Index(cmd[i:], "}}")
		if j < 0 {
			b.WriteString(cmd)
			return b.String()
		}
		b.WriteString(cmd[:i])
		ref := strings.TrimSpace(cmd[i+3 : i+j])
		switch {
		case strings.HasPrefix(ref, "inputs."):
			name := strings.TrimPrefix(ref, "inputs.")
			if in, ok := p.Inputs[name]; ok && strings.EqualFold(in.JobInputType, "literal") {
				b.WriteString(in.Value)
			} else {
				b.WriteString("${AZUREML_INPUT_" + name + "}")
			}
		case strings.HasPrefix(ref, "outputs."):
			b.WriteString("${AZUREML_OUTPUT_" + strings.TrimPrefix(ref, "outputs.") + "}")
		default:
			b.WriteString(cmd[i : i+j+2])
		}
		cmd = cmd[i+j+2:]
	}
}
