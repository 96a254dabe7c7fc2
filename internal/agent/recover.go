package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/procstat"
)

// recoverJobs picks up what a previous agent process with this work dir
// left: a job that was still running cannot be supervised again (it is not
// our child), so its process group is killed and it is reported as lost;
// a finished job whose exit was never acknowledged is reported again. The
// jobs are listed at once (registration carries them); the returned func
// starts reporting them, once the agent holds a node token.
func (a *agent) recoverJobs() (start func()) {
	var found []*job
	start = func() {
		for _, j := range found {
			j.log = a.logger().With("job", j.asg.UID, "attempt", j.asg.Attempt)
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				j.save(false)
				j.finish(a.life)
			}()
		}
	}
	jobsDir := filepath.Join(a.cfg.WorkDir, "jobs")
	KillJobs(a.cfg.WorkDir)
	ents, err := os.ReadDir(jobsDir)
	if err != nil {
		return start
	}
	for _, e := range ents {
		if !e.IsDir() || !safeName(e.Name()) {
			continue
		}
		b, err := readState(filepath.Join(jobsDir, e.Name(), stateFile))
		if err != nil {
			continue
		}
		var s savedJob
		if json.Unmarshal(b, &s) != nil || s.Acked || s.UID != dirUID(e.Name(), s) {
			continue
		}
		j := newJob(a, agentapi.Assignment{UID: s.UID, Attempt: s.Attempt, Outputs: s.Outputs}, a.logger())
		j.dir = filepath.Join(jobsDir, e.Name())
		j.processGone()
		j.state = s.State
		if j.state.Phase != agentapi.PhaseExited {
			j.state.Phase = agentapi.PhaseExited
			j.state.ExitCode = exitNotRun
			j.state.Reason = "lost: the node agent restarted while the job ran"
			j.state.Ended = a.clk.Now()
		}
		j.log.Info("reporting a job a previous agent process left unreported", "phase", s.State.Phase)
		a.mu.Lock()
		a.jobs[s.UID] = j
		a.mu.Unlock()
		found = append(found, j)
	}
	return start
}

// dirUID is the uid of the job whose directory is jobs/name, with s its
// state.json: the name itself, or for a directory a prepared container
// mounted (prepared.go) the uid its state.json gives.
func dirUID(name string, s savedJob) string {
	if strings.HasPrefix(name, preparedPrefix) {
		return s.UID
	}
	return name
}

// KillJobs ends the process groups of jobs that an agent with workDir left
// running (the groups their state files name) and returns how many it
// signaled. A group is ended only if its leader is gone or still carries
// the job's CUMULUS_JOB_UID, so a reused process id is left alone; and only
// a state file the agent made itself is read, not one the job's user (who
// owns the job's folder) put in its place. Providers call it after
// stopping an agent.
//
// A group whose job init still runs is given the init's own way out
// first: the agent's death signal, on which the init removes the job's
// container from the engine (which would keep it running) and kills its
// group. Killing the group at once could kill the init in the middle of
// that, leaving the container to run on. What is left after
// leftJobsCleanup is killed.
func KillJobs(workDir string) int {
	dirs, _ := filepath.Glob(filepath.Join(workDir, "jobs", "*"))
	var groups []int
	n := 0
	for _, dir := range dirs {
		var s savedJob
		b, err := readState(filepath.Join(dir, stateFile))
		if err != nil || json.Unmarshal(b, &s) != nil {
			continue
		}
		pgid := s.PGID
		if pgid == 0 && !s.State.Started.IsZero() && s.State.Phase != agentapi.PhaseExited {
			// A job that an agent of an earlier version started, which
			// kept the group in a file of its own (this version's jobs
			// name theirs in the state from their start on).
			old := filepath.Join(dir, oldPgidFile)
			if b, err := readOwn(old, 0o644, 64); err == nil {
				pgid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				os.Remove(old)
			}
		}
		if pgid <= 1 {
			continue
		}
		uid := dirUID(filepath.Base(dir), s)
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pgid) + "/environ")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The leader is gone; members of its group may not be.
			if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
				n++
			}
		case err != nil:
			continue // not ours to read, so not ours to kill
		case !bytes.Contains(env, []byte("\x00CUMULUS_JOB_UID="+uid+"\x00")) &&
			!bytes.HasPrefix(env, []byte("CUMULUS_JOB_UID="+uid+"\x00")):
			continue
		default:
			if syscall.Kill(pgid, jobinit.DeathSignal) == nil {
				groups = append(groups, pgid)
				n++
			}
		}
	}
	for deadline := time.Now().Add(leftJobsCleanup); ; time.Sleep(20 * time.Millisecond) {
		groups = slices.DeleteFunc(groups, func(pgid int) bool { return !groupRuns(pgid) })
		if len(groups) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return n
}

// leftJobsCleanup is how long KillJobs lets job inits end their jobs
// (above the init's own bound on removing a container).
var leftJobsCleanup = 25 * time.Second

// groupRuns reports whether a process of group pgid runs (zombies,
// waiting for a parent to reap them, do not count).
func groupRuns(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := procstat.Read(pid); ok && s.Live() && s.PGRP == pgid {
			return true
		}
	}
	return false
}

// pruneJobDirs removes the directories of reported jobs beyond the newest
// KeepJobDirs (or keeps them as spares: retireJobDir).
func (a *agent) pruneJobDirs() {
	jobsDir := filepath.Join(a.cfg.WorkDir, "jobs")
	ents, err := os.ReadDir(jobsDir)
	if err != nil {
		return
	}
	type done struct {
		dir   string
		mod   int64
		ended bool
		owner string
	}
	var old []done
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(jobsDir, e.Name(), stateFile)
		b, err := readState(p)
		if err != nil {
			continue
		}
		var s savedJob
		if json.Unmarshal(b, &s) != nil || !s.Acked {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		old = append(old, done{filepath.Join(jobsDir, e.Name()), fi.ModTime().UnixNano(), s.Ended && !strings.HasPrefix(e.Name(), preparedPrefix), s.Owner})
	}
	if len(old) <= a.cfg.KeepJobDirs {
		return
	}
	sort.Slice(old, func(i, k int) bool { return old[i].mod > old[k].mod })
	for _, d := range old[a.cfg.KeepJobDirs:] {
		if err := a.retireJobDir(d.dir, d.owner, d.ended); err != nil {
			a.logger().Warn("could not remove an old job directory", "dir", d.dir, "err", err)
		}
	}
}
