package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Files in a job's directory (work-dir/jobs/<uid>/).
const (
	logFile   = "std.log"    // the job's stdout and stderr
	pgidFile  = "job.pgid"   // the job's process group while it runs
	stateFile = "state.json" // what the agent knows of the job (savedJob)
	outputDir = "outputs"
	inputDir  = "inputs"
)

// exitNotRun is the exit code reported for a job whose command never ran
// (code download failed, the command could not start, …).
const exitNotRun = -1

// job is one assignment on this node, from start to the server's
// acknowledgement of its exit.
type job struct {
	a   *agent
	asg agentapi.Assignment
	dir string
	log *slog.Logger

	stopCh   chan struct{} // closed by stop
	stopOnce sync.Once
	procDone chan struct{} // closed when the job's process is gone (or never ran)
	procOnce sync.Once

	logSent int64 // bytes of std.log the server holds; owned by the log shipper

	mu         sync.Mutex
	state      agentapi.JobState
	reason     string // why the agent stopped the job, first one wins
	reportDone bool   // logs and outputs shipped: report the exit
}

func newJob(a *agent, asg agentapi.Assignment, log *slog.Logger) *job {
	return &job{
		a:        a,
		asg:      asg,
		dir:      filepath.Join(a.cfg.WorkDir, "jobs", asg.UID),
		log:      log.With("job", asg.UID, "attempt", asg.Attempt),
		stopCh:   make(chan struct{}),
		procDone: make(chan struct{}),
		state:    agentapi.JobState{UID: asg.UID, Attempt: asg.Attempt, Phase: agentapi.PhaseRunning},
	}
}

// stop asks the job's process to end (SIGTERM, grace, SIGKILL).
func (j *job) stop(reason string) {
	j.mu.Lock()
	if j.reason == "" {
		j.reason = reason
	}
	j.mu.Unlock()
	j.stopOnce.Do(func() { close(j.stopCh) })
}

func (j *job) processGone() { j.procOnce.Do(func() { close(j.procDone) }) }

func (j *job) stopReason() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.reason
}

// report is the job's state as poll and register carry it: running until
// its logs and outputs are shipped, then exited.
func (j *job) report() agentapi.JobState {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.state
	if !j.reportDone && st.Phase == agentapi.PhaseExited {
		st.Phase, st.ExitCode, st.Reason, st.Ended = agentapi.PhaseRunning, 0, "", time.Time{}
	}
	return st
}

func (j *job) setState(f func(*agentapi.JobState)) agentapi.JobState {
	j.mu.Lock()
	f(&j.state)
	st := j.state
	j.mu.Unlock()
	j.save(false)
	return st
}

// savedJob is state.json: enough to report the job after an agent restart.
type savedJob struct {
	UID     string            `json:"uid"`
	Attempt int               `json:"attempt"`
	Outputs []string          `json:"outputs,omitempty"`
	State   agentapi.JobState `json:"state"`
	Acked   bool              `json:"acked"`
}

func (j *job) save(acked bool) {
	j.mu.Lock()
	s := savedJob{UID: j.asg.UID, Attempt: j.asg.Attempt, Outputs: j.asg.Outputs, State: j.state, Acked: acked}
	j.mu.Unlock()
	b, err := json.Marshal(s)
	if err == nil {
		err = writeFileAtomic(filepath.Join(j.dir, stateFile), b, 0o600)
	}
	if err != nil {
		j.log.Warn("could not save the job's state", "err", err)
	}
}

// run takes the job from assignment to acknowledged exit.
func (j *job) run() {
	ctx := j.a.life
	code, reason := j.execute(ctx)
	end := j.a.clk.Now()
	j.setState(func(s *agentapi.JobState) {
		s.Phase, s.ExitCode, s.Reason, s.Ended = agentapi.PhaseExited, code, reason, end
	})
	j.log.Info("job ended", "exitCode", code, "reason", reason)
	j.finish(ctx)
}

// finish ships the rest of the log and the outputs, then reports the exit
// until the server acknowledges it.
func (j *job) finish(ctx context.Context) {
	unfinished := func(err error) bool {
		if ctx.Err() == nil {
			return false
		}
		// The agent is stopping: state.json says exited-not-reported, so
		// the next agent process on this work dir finishes the job.
		j.log.Warn("the job's end is reported at the next start of this agent", "err", err)
		j.a.finished(j)
		return true
	}
	if err := j.shipLog(ctx, true); err != nil {
		if unfinished(err) {
			return
		}
		j.log.Error("the end of the job's log could not be delivered", "err", err)
	}
	if err := j.uploadOutputs(ctx); err != nil {
		if unfinished(err) {
			return
		}
		j.log.Error("outputs could not be uploaded", "err", err)
		j.setState(func(s *agentapi.JobState) {
			if s.Reason != "" {
				s.Reason += "; "
			}
			s.Reason += "output upload failed: " + err.Error()
		})
	}
	j.mu.Lock()
	j.reportDone = true
	ev := j.state
	j.mu.Unlock()
	j.a.finished(j)
	err := j.a.retry(ctx, j.log, "report the job's exit", func(ctx context.Context) error {
		return j.sendEvent(ctx, ev)
	})
	if err != nil && !permanent(err) {
		unfinished(err)
		return
	}
	if err != nil {
		j.log.Error("the server refused the job's exit; dropping it", "err", err)
	}
	j.save(true)
	j.a.acknowledged(j)
}

func (j *job) sendEvent(ctx context.Context, ev agentapi.JobEvent) error {
	return j.a.c.do(ctx, request{method: http.MethodPost,
		path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/events", json: ev}, nil)
}

// execute prepares the job's directory and runs its command to the end.
// It returns the exit code and, when the agent knows one, a reason.
func (j *job) execute(ctx context.Context) (int, string) {
	defer j.processGone()
	if err := os.RemoveAll(j.dir); err != nil {
		return exitNotRun, "prepare the working directory: " + err.Error()
	}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return exitNotRun, "prepare the working directory: " + err.Error()
	}
	j.save(false)

	// The code download can take a while: let stop interrupt it.
	dctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-j.stopCh:
			cancel()
		case <-dctx.Done():
		}
	}()
	err := j.fetchCode(dctx)
	cancel()
	if r := j.stopReason(); r != "" {
		return exitNotRun, r
	}
	if err != nil {
		return exitNotRun, err.Error()
	}
	env, err := j.prepare()
	if err != nil {
		return exitNotRun, err.Error()
	}

	logf, err := os.OpenFile(filepath.Join(j.dir, logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return exitNotRun, "open the log file: " + err.Error()
	}
	defer logf.Close()
	cmd, cg, err := j.start(env, logf)
	if err != nil {
		return exitNotRun, "start the command: " + err.Error()
	}
	defer cg.remove()
	pgid := cmd.Process.Pid
	pgidPath := filepath.Join(j.dir, pgidFile)
	if err := os.WriteFile(pgidPath, []byte(strconv.Itoa(pgid)+"\n"), 0o644); err != nil {
		j.log.Warn("could not record the job's process group", "err", err)
	}
	defer os.Remove(pgidPath)
	started := j.a.clk.Now()
	j.setState(func(s *agentapi.JobState) { s.Started = started })
	j.log.Info("job started", "pid", pgid)

	// Report "running" (before the exit, however short the job), and ship
	// the log while the command runs.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ev := j.report()
		if err := j.a.retry(ctx, j.log, "report the job running", func(ctx context.Context) error {
			return j.sendEvent(ctx, ev)
		}); err != nil {
			j.log.Warn("the job's start was not reported", "err", err)
		}
	}()
	shipping, stopShipping := context.WithCancel(ctx)
	go func() {
		defer wg.Done()
		j.shipLogLoop(shipping)
	}()

	code := j.wait(cmd, pgid)
	reason := j.stopReason()
	j.processGone()
	stopShipping()
	wg.Wait()
	return code, reason
}

// fetchCode downloads the code snapshot into the working directory and
// each folder input into inputs/<name>. The error says which failed.
func (j *job) fetchCode(ctx context.Context) error {
	if j.asg.CodeBlob != "" {
		if err := j.fetchBlob(ctx, j.asg.CodeBlob, j.dir); err != nil {
			return fmt.Errorf("code download failed: %w", err)
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
	return nil
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
	return Unpack(f, dir)
}

type digestError struct{ got, want string }

func (e *digestError) Error() string {
	return fmt.Sprintf("sha256 mismatch: the server sent %s, the job asked for %s", e.got, e.want)
}

// prepare makes the output folders and returns the job's environment.
func (j *job) prepare() ([]string, error) {
	asg := j.asg
	out := filepath.Join(j.dir, outputDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("make the outputs folder: %w", err)
	}
	env := make([]string, 0, len(os.Environ())+len(asg.Env)+16)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUMULUS_JOIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	for k, v := range asg.Env {
		env = append(env, k+"="+v)
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
	)
	for name := range asg.Inputs {
		dir := filepath.Join(j.dir, inputDir, name)
		env = append(env, "AZUREML_INPUT_"+name+"="+dir, "CUMULUS_INPUT_"+envName(name)+"="+dir)
	}
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
	switch {
	case len(asg.GPUs) > 0:
		ids := make([]string, len(asg.GPUs))
		for i, g := range asg.GPUs {
			ids[i] = strconv.Itoa(g)
		}
		list := strings.Join(ids, ",")
		env = append(env, "CUDA_VISIBLE_DEVICES="+list, "NVIDIA_VISIBLE_DEVICES="+list)
	case len(j.a.gpus) > 0:
		env = append(env, "CUDA_VISIBLE_DEVICES=") // no GPUs were given to this job
	}
	return env, nil
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

// start runs the command in its own process group, inside a cgroup with the
// node's limits when one can be made.
func (j *job) start(env []string, logf *os.File) (*exec.Cmd, *cgroup, error) {
	mk := func(cg *cgroup) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", j.asg.Command)
		cmd.Dir = j.dir
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if cg != nil {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = cg.fd()
		}
		return cmd
	}
	cg := j.a.jobCgroup(j.asg.UID, j.log)
	cmd := mk(cg)
	err := cmd.Start()
	if err != nil && cg != nil {
		j.a.limitsNotEnforced(j.log, fmt.Errorf("start in cgroup: %w", err))
		cg.remove()
		cg = nil
		cmd = mk(nil)
		err = cmd.Start()
	}
	if err != nil {
		return nil, nil, err
	}
	return cmd, cg, nil
}

// wait waits for the command, enforcing the timeout and honouring stop:
// SIGTERM to the process group, then SIGKILL after the grace period. When
// the command ends, what is left of its process group is killed.
func (j *job) wait(cmd *exec.Cmd, pgid int) int {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(exited)
	}()
	grace := j.asg.Grace
	if grace <= 0 {
		grace = j.a.cfg.DefaultGrace
	}
	var timeout, kill <-chan time.Time
	if j.asg.Timeout > 0 {
		timeout = j.a.clk.After(j.asg.Timeout)
	}
	stopCh := j.stopCh
	terminate := func() {
		j.log.Info("stopping the job", "reason", j.stopReason(), "grace", grace)
		signalGroup(pgid, syscall.SIGTERM)
		kill = j.a.clk.After(grace)
		timeout, stopCh = nil, nil
	}
	for {
		select {
		case <-exited:
			signalGroup(pgid, syscall.SIGKILL)
			return exitCode(cmd.ProcessState)
		case <-timeout:
			j.stop(fmt.Sprintf("timeout: the job ran longer than %s", j.asg.Timeout))
			terminate()
		case <-stopCh:
			terminate()
		case <-kill:
			j.log.Info("the job outlived its grace period; killing it")
			signalGroup(pgid, syscall.SIGKILL)
			kill = nil
		}
	}
}

func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, sig) // ESRCH: the group is gone already
	}
}

// exitCode is the process's exit status, or 128+signal when a signal
// killed it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return exitNotRun
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
