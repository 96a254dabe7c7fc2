package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/secret"
)

// JobSpec is the `az ml` v2 command-job YAML.
type JobSpec struct {
	Schema               string                `yaml:"$schema,omitempty"`
	Type                 string                `yaml:"type,omitempty"`
	Name                 string                `yaml:"name,omitempty"`
	DisplayName          string                `yaml:"display_name,omitempty"`
	ExperimentName       string                `yaml:"experiment_name,omitempty"`
	Description          string                `yaml:"description,omitempty"`
	Tags                 map[string]string     `yaml:"tags,omitempty"`
	Command              string                `yaml:"command"`
	Code                 string                `yaml:"code,omitempty"`
	Environment          yaml.Node             `yaml:"environment,omitempty"`
	Compute              string                `yaml:"compute,omitempty"`
	Resources            *JobResourcesSpec     `yaml:"resources,omitempty"`
	Distribution         *DistributionSpec     `yaml:"distribution,omitempty"`
	EnvironmentVariables map[string]string     `yaml:"environment_variables,omitempty"`
	Limits               *JobLimitsSpec        `yaml:"limits,omitempty"`
	Inputs               map[string]yaml.Node  `yaml:"inputs,omitempty"`
	Outputs              map[string]OutputSpec `yaml:"outputs,omitempty"`
	Priority             int                   `yaml:"priority,omitempty"`
	// MinRuntime (a Cumulus extension) is how long each attempt runs at
	// least before its compute's queue policy may preempt it (10m, 1h).
	MinRuntime string `yaml:"min_runtime,omitempty"`
	// A sweep job's (type: sweep; see job_sweep_spec.go).
	SweepSpec `yaml:",inline"`
	// A pipeline job's (type: pipeline; see job_pipeline_spec.go).
	PipelineSpec `yaml:",inline"`
}

// JobResourcesSpec is resources: in the YAML.
type JobResourcesSpec struct {
	InstanceCount int32  `yaml:"instance_count,omitempty"`
	InstanceType  string `yaml:"instance_type,omitempty"`
	ShmSize       string `yaml:"shm_size,omitempty"`
}

// DistributionSpec is distribution: in the YAML.
type DistributionSpec struct {
	Type                    string `yaml:"type"`
	ProcessCountPerInstance int32  `yaml:"process_count_per_instance,omitempty"`
	WorkerCount             int32  `yaml:"worker_count,omitempty"`
	ParameterServerCount    int32  `yaml:"parameter_server_count,omitempty"`
}

// JobLimitsSpec is limits: in the YAML (timeout in seconds).
type JobLimitsSpec struct {
	Timeout int64 `yaml:"timeout,omitempty"`
	// MaxCost (a Cumulus extension) stops the job when its nodes' time
	// costs this much, in the server's currency.
	MaxCost float64 `yaml:"max_cost,omitempty"`
	// A sweep's (seconds for trial_timeout, as timeout).
	MaxTotalTrials      int32 `yaml:"max_total_trials,omitempty"`
	MaxConcurrentTrials int32 `yaml:"max_concurrent_trials,omitempty"`
	TrialTimeout        int64 `yaml:"trial_timeout,omitempty"`
}

// OutputSpec is one output.
type OutputSpec struct {
	Type string `yaml:"type,omitempty"`
	Path string `yaml:"path,omitempty"`
	Mode string `yaml:"mode,omitempty"`
}

// ignored lists the keys of the file that Cumulus accepts, as the az ml
// schema has them, but does not act on, each with why.
func (s JobSpec) ignored() []string {
	var out []string
	if r := s.Resources; r != nil && r.InstanceType != "" {
		out = append(out, "resources.instance_type is ignored: a job runs on its compute's size (size: of the compute)")
	}
	return out
}

// toARM converts the YAML to a command job. baseDir resolves relative
// paths (code:, local inputs), which are packed and uploaded; with no
// client (job validate) they are only checked to be folders.
func (s JobSpec) toARM(ctx context.Context, c *client.Client, baseDir string) (api.Job, error) {
	if strings.EqualFold(s.Type, "pipeline") {
		return s.pipelineToARM(ctx, c, baseDir)
	}
	if s.Jobs != nil || s.Settings != nil {
		return api.Job{}, fmt.Errorf("jobs and settings belong to pipeline jobs; set type: pipeline")
	}
	if strings.EqualFold(s.Type, "parallel") {
		return api.Job{}, fmt.Errorf("a parallel job runs only as a step of a pipeline job: put it under jobs: of a type: pipeline file")
	}
	return s.commandToARM(ctx, c, baseDir, true)
}

// commandToARM converts a command (or sweep) job; a pipeline's step may
// leave its compute to the pipeline (needCompute false).
func (s JobSpec) commandToARM(ctx context.Context, c *client.Client, baseDir string, needCompute bool) (api.Job, error) {
	if strings.EqualFold(s.Type, "sweep") {
		return s.sweepToARM(ctx, c, baseDir, needCompute)
	}
	if s.Trial != nil || s.SearchSpace != nil || s.Objective != nil || s.EarlyTermination != nil || s.SamplingAlgorithm.Kind != 0 {
		return api.Job{}, fmt.Errorf("trial, search_space, sampling_algorithm, objective and early_termination belong to sweep jobs; set type: sweep")
	}
	sc := api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}
	if c != nil {
		sc = c.Scope
	}
	if t := strings.ToLower(s.Type); t != "" && t != "command" {
		return api.Job{}, fmt.Errorf("job type %q is not supported: Cumulus runs command jobs", s.Type)
	}
	if s.Compute == "" && needCompute {
		return api.Job{}, fmt.Errorf("compute is required (compute: azureml:<cluster> in the file, or --compute)")
	}
	name := s.Name
	if name == "" {
		name = newJobName()
	}
	j := api.Job{Name: name}
	p := &j.Properties
	p.JobType, p.Command, p.DisplayName, p.ExperimentName = api.JobTypeCommand, s.Command, s.DisplayName, s.ExperimentName
	p.Description, p.Tags, p.EnvironmentVariables, p.Priority = s.Description, s.Tags, s.EnvironmentVariables, s.Priority
	var err error
	if p.MinRuntime, err = isoDuration("min_runtime", s.MinRuntime); err != nil {
		return j, err
	}
	if p.DisplayName == "" {
		p.DisplayName = name
	}
	if p.ExperimentName == "" {
		p.ExperimentName = "Default"
	}
	if s.Compute != "" {
		p.ComputeID = sc.ComputeID(strings.TrimPrefix(s.Compute, "azureml:"))
	}
	if r := s.Resources; r != nil {
		p.Resources = &api.JobResources{InstanceCount: r.InstanceCount, InstanceType: r.InstanceType, ShmSize: r.ShmSize}
	}
	if d := s.Distribution; d != nil {
		p.Distribution = &api.Distribution{DistributionType: distributionType(d.Type), ProcessCountPerInstance: d.ProcessCountPerInstance,
			WorkerCount: d.WorkerCount, ParameterServerCount: d.ParameterServerCount}
	}
	if s.Limits != nil && s.Limits.Timeout != 0 {
		if s.Limits.Timeout < 0 {
			return j, fmt.Errorf("limits.timeout must be a positive number of seconds")
		}
		p.Limits = &api.JobLimits{JobLimitsType: "Command", Timeout: fmt.Sprintf("PT%dS", s.Limits.Timeout)}
	}
	if s.Limits != nil && s.Limits.MaxCost != 0 {
		if s.Limits.MaxCost < 0 {
			return j, fmt.Errorf("limits.max_cost must be a positive amount")
		}
		if p.Limits == nil {
			p.Limits = &api.JobLimits{JobLimitsType: "Command"}
		}
		p.Limits.MaxCost = &s.Limits.MaxCost
	}
	env, err := environmentID(s.Environment)
	if err != nil {
		return j, err
	}
	p.EnvironmentID = env
	if s.Code != "" {
		digest, err := uploadFolder(ctx, c, resolve(baseDir, s.Code))
		if err != nil {
			return j, fmt.Errorf("code %s: %w", s.Code, err)
		}
		p.CodeID = sc.WorkspaceID() + "/codes/" + name + "/versions/" + digest
	}
	if p.Inputs, p.Outputs, err = jobIO(ctx, c, baseDir, s.Inputs, s.Outputs); err != nil {
		return j, err
	}
	return j, nil
}

func distributionType(t string) string {
	switch strings.ToLower(t) {
	case "mpi":
		return "Mpi"
	case "pytorch":
		return "PyTorch"
	case "tensorflow":
		return "TensorFlow"
	}
	return t
}

// environmentID reads environment: either "azureml:name:version" or an
// inline {image: …} (kept as "image:<name>" for the node).
func environmentID(n yaml.Node) (string, error) {
	switch n.Kind {
	case 0:
		return "", nil
	case yaml.ScalarNode:
		v := n.Value
		if !strings.HasPrefix(v, "azureml:") && !strings.HasPrefix(v, "image:") && !strings.Contains(v, "/environments/") {
			return "", fmt.Errorf("environment %q: name an environment as azureml:<name>:<version> or azureml:<name>@latest, or give an image as environment: {image: %s}", v, v)
		}
		return v, nil
	case yaml.MappingNode:
		var inline struct {
			Image     string    `yaml:"image"`
			Name      string    `yaml:"name"`
			Version   yaml.Node `yaml:"version"`
			CondaFile string    `yaml:"conda_file"`
			Build     yaml.Node `yaml:"build"`
		}
		if err := n.Decode(&inline); err != nil {
			return "", fmt.Errorf("environment: %w", err)
		}
		if inline.Name != "" && inline.Version.Value != "" {
			// An environment with a name and a version is that version
			// of the workspace's environment (az ml registers it from the
			// file; in Cumulus it is registered once, with its image).
			return "azureml:" + inline.Name + ":" + inline.Version.Value, nil
		}
		if inline.CondaFile != "" || inline.Build.Kind != 0 {
			return "", fmt.Errorf("environment: Cumulus runs images as they are and does not build conda_file or build: into one; " +
				"build the image once, register it (cumulus environment create --name NAME --version 1 --image IMAGE) and name it here as azureml:NAME:1")
		}
		if inline.Image == "" {
			return "", fmt.Errorf("environment: an inline environment needs image:")
		}
		return "image:" + inline.Image, nil
	}
	return "", fmt.Errorf("environment must be azureml:<name>:<version> or {image: …}")
}

// inputOf reads one input: a literal (number, string, bool) or
// {type, path}; a local folder path is packed and uploaded.
// jobIO are a job's inputs (each as inputOf makes it) and outputs as ARM
// has them; nil for none.
func jobIO(ctx context.Context, c *client.Client, baseDir string, ins map[string]yaml.Node, outs map[string]OutputSpec) (map[string]api.JobInput, map[string]api.JobOutput, error) {
	var inputs map[string]api.JobInput
	for k, n := range ins {
		in, err := inputOf(ctx, c, baseDir, k, n)
		if err != nil {
			return nil, nil, err
		}
		if inputs == nil {
			inputs = map[string]api.JobInput{}
		}
		inputs[k] = in
	}
	var outputs map[string]api.JobOutput
	for k, o := range outs {
		if outputs == nil {
			outputs = map[string]api.JobOutput{}
		}
		t := o.Type
		if t == "" {
			t = "uri_folder"
		}
		outputs[k] = api.JobOutput{JobOutputType: t, URI: o.Path, Mode: o.Mode}
	}
	return inputs, outputs, nil
}

func inputOf(ctx context.Context, c *client.Client, baseDir, name string, n yaml.Node) (api.JobInput, error) {
	if n.Kind == yaml.ScalarNode {
		return api.JobInput{JobInputType: "literal", Value: n.Value}, nil
	}
	var in struct {
		Type string `yaml:"type"`
		Path string `yaml:"path"`
		Mode string `yaml:"mode"`
	}
	if err := n.Decode(&in); err != nil {
		return api.JobInput{}, fmt.Errorf("inputs.%s: %w", name, err)
	}
	if in.Type == "" {
		in.Type = "uri_folder"
	}
	uri, desc := in.Path, ""
	if uri != "" && !strings.Contains(uri, "://") && !strings.HasPrefix(uri, "azureml:") {
		upload := uploadFolder
		if strings.EqualFold(in.Type, "uri_file") {
			upload = uploadFile // a folder of that one file: the job gets the file's path
		}
		digest, err := upload(ctx, c, resolve(baseDir, uri))
		if err != nil {
			return api.JobInput{}, fmt.Errorf("inputs.%s: %w", name, err)
		}
		// The uri names the upload by its digest; the description keeps
		// the path it came from, for people (the studio shows it).
		uri, desc = "cumulus://blobs/"+digest, "uploaded from "+in.Path
	}
	return api.JobInput{JobInputType: in.Type, URI: uri, Mode: in.Mode, Description: desc}, nil
}

// resolve is a path of a job file: ~ is the home directory, a relative
// path is relative to the file's folder.
func resolve(base, p string) string {
	p = expandHome(p)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// uploadFolder packs a folder and uploads it content-addressed.
func uploadFolder(ctx context.Context, c *client.Client, dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a folder", dir)
	}
	if c == nil {
		return "unchecked", nil
	}
	var buf bytes.Buffer
	if err := files.Pack(&buf, dir); err != nil {
		return "", fmt.Errorf("pack %s: %w", dir, err)
	}
	return c.UploadBlob(ctx, buf.Bytes())
}

// uploadFile packs one file as a folder that holds it and uploads it
// content-addressed.
func uploadFile(ctx context.Context, c *client.Client, path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a folder; a uri_file input is one file (give type: uri_folder for a folder)", path)
	}
	if c == nil {
		return "unchecked", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := files.PackFile(&buf, filepath.Base(path), b); err != nil {
		return "", err
	}
	return c.UploadBlob(ctx, buf.Bytes())
}

var (
	adjectives = []string{"amber", "bold", "brave", "calm", "clever", "crisp", "eager", "gentle", "happy", "keen", "lively", "lucid", "mellow", "nimble", "quiet", "sharp", "sunny", "swift", "tidy", "witty"}
	nouns      = []string{"apple", "brook", "cloud", "comet", "falcon", "fern", "harbor", "lagoon", "maple", "meadow", "orchid", "otter", "pepper", "pine", "river", "saddle", "spruce", "tiger", "willow", "yarn"}
)

// newJobName makes a readable unique name, like Azure's (calm_river_3f9k2).
func newJobName() string {
	id := secret.NewID()
	pick := func(list []string, hex string) string {
		n, _ := strconv.ParseUint(hex, 16, 32)
		return list[int(n)%len(list)]
	}
	return pick(adjectives, id[0:2]) + "_" + pick(nouns, id[2:4]) + "_" + id[24:32]
}
