package agent

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// A parallel step's part on a node: the command the step's job runs starts
// the driver (parallel_driver.py, written into the job's folder), with the
// job's Python. The driver splits input_data into mini-batches (the same
// split on every node), starts the step's worker processes (each imports
// the entry script and calls its init() once, then run(mini_batch) for
// each mini-batch it is given), and asks the control plane for
// mini-batches through this agent's local endpoint, which adds the job's
// attempt and relays with the node's token: the job never holds a
// credential of the control plane.

//go:embed parallel_driver.py
var parallelDriver []byte

// parallelPath is the driver's route on the agent's local endpoint.
const parallelPath = "/parallel"

// parallelDir is the folder of the driver and its settings in a job's folder.
const parallelDir = ".cumulus-parallel"

// parallelConfig is what the driver reads from its settings file.
type parallelConfig struct {
	agentapi.Parallel
	InputPath string `json:"inputPath"`
}

// prepareParallel writes the driver and its settings into the job's folder
// and returns the driver's environment.
func (j *job) prepareParallel() ([]string, error) {
	p := j.asg.Parallel
	if p == nil {
		return nil, nil
	}
	dir := filepath.Join(j.dir, parallelDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("prepare the parallel driver: %w", err)
	}
	cfg := parallelConfig{Parallel: *p, InputPath: j.inputPath(p.Input)}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	driver, config := filepath.Join(dir, "driver.py"), filepath.Join(dir, "config.json")
	if err := os.WriteFile(driver, parallelDriver, 0o644); err != nil {
		return nil, fmt.Errorf("prepare the parallel driver: %w", err)
	}
	if err := os.WriteFile(config, raw, 0o644); err != nil {
		return nil, fmt.Errorf("prepare the parallel driver: %w", err)
	}
	url, err := j.a.msiStart()
	if err != nil {
		return nil, fmt.Errorf("start the parallel endpoint: %w", err)
	}
	secret, err := j.a.msiGrant(j)
	if err != nil {
		return nil, fmt.Errorf("parallel endpoint secret: %w", err)
	}
	return []string{agentapi.ParallelDriverEnv + "=" + driver, agentapi.ParallelConfigEnv + "=" + config,
		agentapi.ParallelEndpointEnv + "=" + strings.TrimSuffix(url, "/msi/token") + parallelPath, agentapi.ParallelSecretEnv + "=" + secret}, nil
}

// inputPath is where an input is on this node: its folder, or the one file
// in it for an input that is a file.
func (j *job) inputPath(name string) string {
	dir := filepath.Join(j.dir, inputDir, name)
	file := j.asg.DataInputs[name].File
	for _, f := range j.asg.FileInputs {
		file = file || f == name
	}
	if file {
		ents, err := os.ReadDir(dir)
		if err == nil && len(ents) == 1 && ents[0].Type().IsRegular() {
			return filepath.Join(dir, ents[0].Name())
		}
	}
	return dir
}

// serveParallel relays a driver's exchange to the control plane.
func (a *agent) serveParallel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	a.mu.Lock()
	j := a.msiJobs[r.Header.Get("secret")]
	a.mu.Unlock()
	if j == nil || j.asg.Parallel == nil {
		http.Error(w, "the secret header is missing or not the secret of a running parallel step", http.StatusUnauthorized)
		return
	}
	var req agentapi.ParallelRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 96<<20)).Decode(&req); err != nil {
		http.Error(w, "the request is not a parallel exchange: "+err.Error(), http.StatusBadRequest)
		return
	}
	req.Attempt = j.asg.Attempt
	ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
	defer cancel()
	var out agentapi.ParallelResponse
	err := a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/parallel", json: req}, &out)
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		http.Error(w, he.Error(), he.Status)
		return
	case err != nil: // the control plane is away (a restart, a failover): the driver asks again
		http.Error(w, "the control plane could not be reached: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
