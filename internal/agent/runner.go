package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// Files in a job's directory (work-dir/jobs/<uid>/).
const (
	logFile       = "std.log"    // the job's stdout and stderr
	stateFile     = "state.json" // what the agent knows of the job (savedJob)
	oldPgidFile   = "job.pgid"   // the process group, as agents before savedJob.PGID kept it
	outputDir     = "outputs"
	checkpointDir = "checkpoint"
	inputDir      = "inputs"
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
	// initKillsAll: the job's one process runs under an init that ends
	// every process of the job user when it is through (jobinit.Spec.KillAll).
	initKillsAll bool
	procDone     chan struct{} // closed when the job's process is gone (or never ran)
	procOnce     sync.Once
	// done is closed when the runner is through with the job's folder
	// (its exit reported, or left for the next agent start); prev is the
	// job's earlier attempt on this node, whose runner the next attempt
	// waits for before it empties the same folder.
	done chan struct{}
	prev *job

	logSent int64        // bytes of std.log the server holds; owned by the log shipper
	pgid    atomic.Int64 // the process group of its processes while they run; 0 before and after
	// ended: every process of the job's user was ended with the job, so
	// nothing of it holds its folder (which may then be kept for a later
	// job: jobdirs.go).
	ended atomic.Bool

	image      string             // the job's image when it runs in containers
	containers []string           // names of its containers
	prep       *preparedContainer // the prepared container it took, if any

	mu         sync.Mutex
	state      agentapi.JobState
	grace      time.Duration        // overrides the assignment's grace (preemption)
	hostEnv    int                  // how many leading entries of the job's env are the agent's own
	reason     string               // why the agent stopped the job, first one wins
	reportDone bool                 // logs and outputs shipped: report the exit
	restored   map[string]fileStamp // checkpoint files as restored, by path
}

func newJob(a *agent, asg agentapi.Assignment, log *slog.Logger) *job {
	return &job{
		a:        a,
		asg:      asg,
		dir:      filepath.Join(a.cfg.WorkDir, "jobs", asg.UID),
		log:      log.With("job", asg.UID, "attempt", asg.Attempt),
		stopCh:   make(chan struct{}),
		procDone: make(chan struct{}),
		done:     make(chan struct{}),
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

// stopAtCostLimit stops the job when it has held its node for its
// assignment's CostLimit (counted from its arrival: preparing costs too),
// unless it ended first.
func (j *job) stopAtCostLimit() {
	select {
	case <-j.a.clk.After(j.asg.CostLimit):
		j.log.Info("the job reached its cost limit", "after", j.asg.CostLimit)
		j.stop(j.asg.CostLimitReason)
	case <-j.procDone:
	}
}

// setGrace sets the SIGTERM → SIGKILL grace for the next stop.
func (j *job) setGrace(d time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if d > 0 && j.grace == 0 {
		j.grace = d
	}
}

// graceNow is the grace to give the job when it is stopped now.
func (j *job) graceNow() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.grace > 0:
		return j.grace
	case j.asg.Grace > 0:
		return j.asg.Grace
	}
	return j.a.cfg.DefaultGrace
}

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
	// PGID is the job's process group while its command runs (0 before
	// and after), for KillJobs to end when the agent is gone.
	PGID int `json:"pgid,omitempty"`
	// Ended says that every process of the job's user was ended with the
	// job (job.ended); Owner is who submitted it (Assignment.Owner). A
	// pruned folder is kept for the same owner's next job when both are
	// set (jobdirs.go).
	Ended bool   `json:"ended,omitempty"`
	Owner string `json:"owner,omitempty"`
}

func (j *job) save(acked bool) {
	j.mu.Lock()
	s := savedJob{UID: j.asg.UID, Attempt: j.asg.Attempt, Outputs: j.asg.Outputs, State: j.state, Acked: acked, PGID: int(j.pgid.Load()),
		Ended: j.ended.Load(), Owner: j.asg.Owner}
	j.mu.Unlock()
	b, err := json.Marshal(s)
	if err == nil {
		err = writeState(filepath.Join(j.dir, stateFile), b)
	}
	if err != nil {
		j.log.Warn("could not save the job's state", "err", err)
	}
}

// run takes the job from assignment to acknowledged exit.
func (j *job) run() {
	ctx := j.a.life
	code, reason := j.execute(ctx)
	if reason == "" && code == 128+int(syscall.SIGTERM) && j.a.toldToStop() {
		reason = agentapi.ReasonNodeStopped
	}
	end := j.a.clk.Now()
	j.setState(func(s *agentapi.JobState) {
		s.Phase, s.ExitCode, s.Reason, s.Ended = agentapi.PhaseExited, code, reason, end
		s.NodeStopped = reason == agentapi.ReasonNodeStopped
	})
	j.log.Info("job ended", "exitCode", code, "reason", reason)
	j.finish(ctx)
}

// finish ships the rest of the log and the outputs, then reports the exit
// until the server acknowledges it.
func (j *job) finish(ctx context.Context) {
	defer close(j.done)
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
	defer j.a.msiRevoke(j)
	defer j.removeContainers()
	if j.prev != nil {
		// The earlier attempt still reports its end from the same folder
		// (its state file): wait until it is through with it.
		select {
		case <-j.prev.done:
		case <-j.stopCh:
			return exitNotRun, j.stopReason()
		}
	}
	if pc := j.a.takePrepared(j.asg, j.stopCh); pc != nil {
		// The prepared container mounts an empty directory of its own at
		// the same path: that is this job's directory (prepared.go). It
		// must not be recreated, or the container would not see it.
		j.prep, j.dir = pc, pc.dir
		j.containers = append(j.containers, pc.name)
		defer pc.handedOver()
		j.a.prepare(j.asg.Image) // the next job's, at once: it takes a while
	} else {
		if err := os.RemoveAll(j.dir); err != nil {
			return exitNotRun, "prepare the working directory: " + err.Error()
		}
		if err := os.MkdirAll(filepath.Dir(j.dir), 0o755); err != nil {
			return exitNotRun, "prepare the working directory: " + err.Error()
		}
		if !j.a.takeSpare(j.dir, j.asg.Owner) {
			if err := os.Mkdir(j.dir, 0o755); err != nil {
				return exitNotRun, "prepare the working directory: " + err.Error()
			}
		}
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

	procs, err := distrib.Processes(j.asg.Distribution, j.asg.InstanceIndex, j.asg.NodeIPs)
	if err != nil {
		return exitNotRun, err.Error()
	}
	logf, err := os.OpenFile(filepath.Join(j.dir, logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return exitNotRun, "open the log file: " + err.Error()
	}
	defer logf.Close()
	j.writeNotes(logf)
	if err := j.chooseRuntime(ctx, logf); err != nil {
		return exitNotRun, err.Error()
	}
	if err := j.checkRendezvousPorts(); err != nil {
		return exitNotRun, err.Error()
	}
	if p, ok, err := j.mpiLaunch(env, logf); err != nil {
		return exitNotRun, err.Error()
	} else if ok {
		procs = []distrib.Process{p}
	} else if d := j.asg.Distribution; d != nil {
		hostfile := filepath.Join(j.dir, "hostfile")
		if err := os.WriteFile(hostfile, []byte(distrib.Hostfile(j.asg.NodeIPs, d.ProcessesPerNode)), 0o644); err != nil {
			return exitNotRun, "write the MPI hostfile: " + err.Error()
		}
		env = append(env, "CUMULUS_HOSTFILE="+hostfile)
	}
	if j.image == "" {
		if err := j.a.freshJobSpace(j.asg.Owner); err != nil {
			return exitNotRun, err.Error()
		}
		if err := j.handOver(); err != nil {
			return exitNotRun, err.Error()
		}
	}
	// The job's processes get a parent-death signal tied to the thread
	// that starts them: keep this goroutine on its thread until it ends
	// (the thread then exits with it), so that the signal fires when the
	// agent dies, not when the Go runtime moves on.
	runtime.LockOSThread()
	group, cg, err := j.start(env, procs, logf)
	if j.prep != nil {
		j.prep.handedOver()
	}
	if j.image != "" && j.prep == nil && j.a.fitsPrepared(j.asg) {
		// For the next job, when it is like this one (a node whose jobs get
		// GPUs, say, would prepare containers none of them takes).
		j.a.prepare(j.image)
	}
	if err != nil {
		return exitNotRun, "start the command: " + err.Error()
	}
	defer cg.remove()
	pgid := group.pgid
	j.pgid.Store(int64(pgid))
	defer j.pgid.Store(0) // the exit's save then records no group
	started := j.a.clk.Now()
	j.setState(func(s *agentapi.JobState) { s.Started = started }) // saved with the group
	j.log.Info("job started", "pid", pgid)

	// Report "running" once the job has run for ReportRunningAfter (one
	// that ends sooner is reported by its exit, which carries its start),
	// and ship the log while the command runs.
	var wg sync.WaitGroup
	wg.Add(2)
	ended := make(chan struct{})
	go func() {
		defer wg.Done()
		if d := j.a.cfg.ReportRunningAfter; d > 0 {
			select {
			case <-ended:
				return
			case <-j.a.clk.After(d):
			}
		}
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

	code := j.wait(group)
	close(ended)
	j.a.msiRevoke(j) // tokens only while the job runs
	reason := j.stopReason()
	j.processGone()
	stopShipping()
	wg.Wait()
	return code, reason
}

// procGroup is the processes of the job on this node, all in one process
// group so that a signal reaches every one of them.
type procGroup struct {
	cmds  []*exec.Cmd
	ranks []int
	pgid  int
	log   *lineLog // nil with one process
}

// start runs the command once per process of this node (one, unless the
// job is distributed with several processes per node), in one new process
// group, inside a cgroup with the node's limits when one can be made.
// Each process runs under the job init (sandbox.go), which dies with the
// agent and takes the group with it. The caller's thread is locked.
// With several processes each output line is prefixed with its rank.
func (j *job) start(env []string, procs []distrib.Process, logf *os.File) (*procGroup, *cgroup, error) {
	var shared *lineLog
	if len(procs) > 1 {
		shared = &lineLog{w: logf}
	}
	mk := func(cg *cgroup, p distrib.Process, pgid int) (*exec.Cmd, error) {
		cmd := exec.Command("/bin/sh", "-c", j.asg.Command)
		if p.Argv != nil {
			cmd = exec.Command(p.Argv[0], p.Argv[1:]...)
		}
		cmd.Env = append(append([]string(nil), env...), p.Env...)
		if j.image != "" {
			cmd = j.containerCommand(p, cmd.Env)
		}
		cmd.Dir = j.dir
		if shared != nil {
			w := shared.prefixed(fmt.Sprintf("[rank %d] ", p.Rank))
			cmd.Stdout, cmd.Stderr = w, w
			cmd.WaitDelay = 2 * time.Second // a straggler holding the pipe cannot block Wait
		} else {
			cmd.Stdout, cmd.Stderr = logf, logf
		}
		cmd, err := j.initCommand(cmd, j.image == "", len(procs) == 1)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, pgid
		if cg != nil {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = cg.fd()
		}
		return cmd, nil
	}
	cg := j.a.jobCgroup(j.asg.UID, j.log)
	group := &procGroup{log: shared}
	for i, p := range procs {
		cmd, err := mk(cg, p, group.pgid)
		if err == nil {
			err = startInit(cmd)
		}
		if err != nil && cg != nil && i == 0 {
			j.a.limitsNotEnforced(j.log, fmt.Errorf("start in cgroup: %w", err))
			cg.remove()
			cg = nil
			if cmd, err = mk(nil, p, 0); err == nil {
				err = startInit(cmd)
			}
		}
		if err != nil {
			signalGroup(group.pgid, syscall.SIGKILL)
			for _, c := range group.cmds {
				_ = c.Wait()
			}
			if cg != nil {
				cg.remove()
			}
			return nil, nil, err
		}
		if i == 0 {
			group.pgid = cmd.Process.Pid
		}
		group.cmds = append(group.cmds, cmd)
		group.ranks = append(group.ranks, p.Rank)
	}
	return group, cg, nil
}

// wait waits for the job's processes, enforcing the timeout and honouring
// stop: SIGTERM to the process group, then SIGKILL after the grace period.
// When one process fails the others are stopped (a distributed job cannot
// go on without a rank). When all have ended, what is left of the group is
// killed. The job's exit code is the first failure's, else 0.
func (j *job) wait(g *procGroup) int {
	type exit struct{ rank, code int }
	exited := make(chan exit, len(g.cmds))
	for i, cmd := range g.cmds {
		go func() {
			_ = cmd.Wait() // the exit status is read from ProcessState
			exited <- exit{g.ranks[i], exitCode(cmd.ProcessState)}
		}()
	}
	var timeout, kill <-chan time.Time
	if j.asg.Timeout > 0 {
		timeout = j.a.clk.After(j.asg.Timeout)
	}
	stopCh := j.stopCh
	terminate := func() {
		grace := j.graceNow()
		j.log.Info("stopping the job", "reason", j.stopReason(), "grace", grace)
		signalGroup(g.pgid, syscall.SIGTERM)
		kill = j.a.clk.After(grace)
		timeout, stopCh = nil, nil
	}
	code, left := 0, len(g.cmds)
	for {
		select {
		case e := <-exited:
			left--
			if e.code != 0 && code == 0 {
				code = e.code
				if left > 0 && stopCh != nil {
					j.stop(fmt.Sprintf("rank %d exited with code %d; stopping the other ranks", e.rank, e.code))
					terminate()
				}
			}
			if left == 0 {
				signalGroup(g.pgid, syscall.SIGKILL)
				if cred := j.a.jobCred; cred != nil && j.image == "" {
					ended := j.initKillsAll && g.initExited()
					if !ended {
						// Processes that left the group end too, before the
						// agent reads the job's outputs.
						err := jobinit.KillAllOf(cred)
						if err != nil {
							j.log.Warn("could not end the job user's processes", "err", err)
						}
						ended = err == nil
					}
					j.ended.Store(ended)
				}
				g.log.flush()
				return code
			}
		case <-timeout:
			j.stop(fmt.Sprintf("timeout: the job ran longer than %s", j.asg.Timeout))
			terminate()
		case <-stopCh:
			terminate()
		case <-kill:
			j.log.Info("the job outlived its grace period; killing it")
			signalGroup(g.pgid, syscall.SIGKILL)
			j.removeContainers() // a container outlives its killed docker client
			kill = nil
		}
	}
}

// initExited says whether the job's one init exited rather than being
// killed: one that was to end the job user's processes then has.
func (g *procGroup) initExited() bool {
	if len(g.cmds) != 1 {
		return false
	}
	ps := g.cmds[0].ProcessState
	return ps != nil && ps.Exited()
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

// leaveWait is how long a job that ended by a SIGTERM the agent did not
// send waits for the agent's own: see toldToStop.
const leaveWait = time.Second

// toldToStop reports whether the agent is told to stop now or within
// leaveWait. A node stopped from outside as a whole (Slurm cancelling its
// job, a container or machine stopped) sends SIGTERM to the job's
// processes and to the agent at once, and the job may end before the
// agent sees its own signal: its end is then the node's stop (the job is
// requeued), not the job's failure with exit code 143.
func (a *agent) toldToStop() bool {
	if a.stopping == nil {
		return false
	}
	select {
	case <-a.stopping:
		return true
	case <-a.clk.After(leaveWait):
		return false
	}
}
