package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/files"
)

// fetchCode downloads the code snapshot into the working directory and
// each folder input into inputs/<name>. The error says which failed.
func (j *job) fetchCode(ctx context.Context) error {
	if j.asg.CodeBlob != "" {
		if err := j.fetchBlob(ctx, j.asg.CodeBlob, j.dir); err != nil {
			return fmt.Errorf("code download failed: %w", err)
		}
	}
	if j.asg.Checkpoint {
		if err := j.fetchCheckpoint(ctx); err != nil {
			return fmt.Errorf("checkpoint restore failed: %w", err)
		}
	}
	names := make([]string, 0, len(j.asg.Inputs))
	for name := range j.asg.Inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !safeName(name) {
			return fmt.Errorf("input name %q may hold only letters, digits, '.', '_' and '-'", name)
		}
		if err := j.fetchBlob(ctx, j.asg.Inputs[name], filepath.Join(j.dir, inputDir, name)); err != nil {
			return fmt.Errorf("input %s download failed: %w", name, err)
		}
	}
	return j.fetchData(ctx)
}

// fetchBlob downloads a tar.gz blob, checks its sha256 and unpacks it into
// dir.
func (j *job) fetchBlob(ctx context.Context, digest, dir string) error {
	sum := strings.ToLower(digest)
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return fmt.Errorf("blob %q is not a sha256 digest", digest)
	}
	tmp, err := os.CreateTemp(filepath.Join(j.a.cfg.WorkDir, "jobs"), "."+j.asg.UID+".blob-*")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	err = j.a.retry(ctx, j.log, "download blob "+sum[:12], func(ctx context.Context) error {
		resp, err := j.a.c.send(ctx, request{method: http.MethodGet, path: agentapi.BlobPrefix + "/" + sum})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		f, err := os.Create(tmp.Name())
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return final(&digestError{got: got, want: sum})
		}
		return nil
	})
	var de *digestError
	if errors.As(err, &de) {
		return de
	}
	if err != nil {
		return err
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return err
	}
	defer f.Close()
	return files.Unpack(f, dir)
}

type digestError struct{ got, want string }

func (e *digestError) Error() string {
	return fmt.Sprintf("sha256 mismatch: the server sent %s, the job asked for %s", e.got, e.want)
}

// prepare makes the output folders and returns the job's environment,
// which holds nothing of the agent's own (see jobBaseEnv).
func (j *job) prepare() ([]string, error) {
	asg := j.asg
	out := filepath.Join(j.dir, outputDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("make the outputs folder: %w", err)
	}
	// The agent's environment is not the job's: PATH, HOME and the locale
	// (jobBaseEnv), then the job's own variables and the Cumulus and Azure
	// ML ones.
	env := jobBaseEnv(j.dir)
	j.hostEnv = len(env) // what follows is the job's own: a container gets only that
	for k, v := range asg.Env {
		env = append(env, k+"="+v)
	}
	if c := j.a.cfg.VCPUs; c > 0 {
		env = append(env, "CUMULUS_VCPUS="+strconv.Itoa(c))
	}
	if m := j.a.cfg.MemoryMB; m > 0 {
		env = append(env, "CUMULUS_MEMORY_MB="+strconv.Itoa(m))
	}
	numNodes := len(asg.NodeIPs)
	if numNodes == 0 {
		numNodes = 1
	}
	env = append(env,
		"CUMULUS_JOB_NAME="+asg.Name,
		"CUMULUS_JOB_UID="+asg.UID,
		"CUMULUS_ATTEMPT="+strconv.Itoa(asg.Attempt),
		"CUMULUS_NODE_ID="+j.a.node(),
		"CUMULUS_NODE_RANK="+strconv.Itoa(asg.InstanceIndex),
		"CUMULUS_NUM_NODES="+strconv.Itoa(numNodes),
		"CUMULUS_NODE_IPS="+strings.Join(asg.NodeIPs, ","),
		"CUMULUS_OUTPUT_DIR="+out,
		"CUMULUS_CHECKPOINT_DIR="+filepath.Join(j.dir, checkpointDir),
	)
	if err := os.MkdirAll(filepath.Join(j.dir, checkpointDir), 0o755); err != nil {
		return nil, fmt.Errorf("make the checkpoint folder: %w", err)
	}
	env = append(env, j.a.trackingEnv(asg, j.dir)...)
	if asg.Identity {
		url, err := j.a.msiStart()
		if err != nil {
			return nil, fmt.Errorf("start the managed identity endpoint: %w", err)
		}
		secret, err := j.a.msiGrant(j)
		if err != nil {
			return nil, fmt.Errorf("managed identity secret: %w", err)
		}
		env = append(env, "MSI_ENDPOINT="+url, "MSI_SECRET="+secret, "DEFAULT_IDENTITY_CLIENT_ID="+asg.DefaultClientID)
	}
	for name := range asg.Inputs {
		dir := j.inputPath(name) // a file input names its file
		env = append(env, "AZUREML_INPUT_"+name+"="+dir, "CUMULUS_INPUT_"+envName(name)+"="+dir)
	}
	env = append(env, j.dataInputEnv()...)
	for _, name := range asg.Outputs {
		if !safeName(name) || name == "default" {
			return nil, fmt.Errorf("output name %q may hold only letters, digits, '.', '_' and '-' and must not be \"default\"", name)
		}
		dir := filepath.Join(out, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("make output folder %s: %w", name, err)
		}
		env = append(env, "AZUREML_OUTPUT_"+name+"="+dir, "CUMULUS_OUTPUT_"+envName(name)+"="+dir)
	}
	if asg.Parallel != nil {
		penv, err := j.prepareParallel()
		if err != nil {
			return nil, err
		}
		env = append(env, penv...)
	}
	return append(env, gpuEnv(j.jobGPUs(), j.a.machineGPUs)...), nil
}

// envName turns an output name into the tail of an environment variable.
func envName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' {
			return '_'
		}
		return r
	}, strings.ToUpper(name))
}
