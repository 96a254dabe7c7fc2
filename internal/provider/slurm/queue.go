package slurm

import (
	"sort"
	"strconv"
	"strings"
)

// queueFormat is the squeue output the provider reads: the comment first
// (this control plane's tag, compared whole: another job's comment may
// hold anything), the reason last (Slurm's words may hold spaces).
const queueFormat = "%k|%i|%T|%P|%j|%r"

// slurmJob is one of this control plane's node jobs as squeue shows it.
type slurmJob struct {
	ID        string // Slurm's job id
	Node      string // the node id: the job's name
	State     string // Slurm's job state: PENDING, RUNNING, COMPLETING, CANCELLED, …
	Partition string
	Reason    string // why it is pending (Resources, Priority, …); "None"
}

// parseQueue reads squeue's queueFormat output and keeps the jobs whose
// comment is tag, newest last.
func parseQueue(out, tag string) []slurmJob {
	var jobs []slurmJob
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 6)
		if len(f) != 6 || f[0] != tag {
			continue
		}
		jobs = append(jobs, slurmJob{ID: f[1], State: f[2], Partition: f[3], Node: f[4], Reason: strings.TrimSpace(f[5])})
	}
	sort.SliceStable(jobs, func(i, j int) bool { return older(jobs[i].ID, jobs[j].ID) })
	return jobs
}

// older says whether job id a was given before b (ids grow; an id that is
// not a number sorts first).
func older(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA != nil || errB != nil {
		return errA != nil && errB == nil
	}
	return x < y
}

// newest is the newest job of each node: a node made again after a
// Delete has a new job, and its old one may still be listed, ended.
func newest(jobs []slurmJob) map[string]slurmJob {
	out := make(map[string]slurmJob, len(jobs))
	for _, j := range jobs { // oldest first
		out[j.Node] = j
	}
	return out
}

// phase is what a Slurm job state means for its node.
type phase int

const (
	// phaseStarting: waiting for a machine, or being started on one.
	phaseStarting phase = iota
	// phaseRunning: its agent runs.
	phaseRunning
	// phaseEnding: Slurm is ending it (its processes are being signalled
	// and reaped); the final state shows when they are gone.
	phaseEnding
	// phaseSuspended: Slurm stopped its processes (preemption by
	// suspension, scontrol suspend); the agent cannot answer.
	phaseSuspended
	// phaseEnded: its processes are gone.
	phaseEnded
)

func phaseOf(state string) phase {
	switch state {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "RESIZING":
		return phaseStarting
	case "RUNNING", "SIGNALING":
		return phaseRunning
	case "COMPLETING", "STAGE_OUT":
		return phaseEnding
	case "SUSPENDED", "STOPPED":
		return phaseSuspended
	}
	return phaseEnded
}

// live reports whether the job counts as the node's machine: starting or
// running.
func (j slurmJob) live() bool {
	p := phaseOf(j.State)
	return p == phaseStarting || p == phaseRunning
}

// waits reports whether the job waits for a machine for a reason Slurm
// gives ("None": the scheduler has not looked at it yet).
func (j slurmJob) waits() bool {
	return j.State == "PENDING" && j.Reason != "" && j.Reason != "None"
}

// endWords say how Slurm ended a node's job, after "Slurm job N ".
var endWords = map[string]string{
	"CANCELLED":     "was cancelled (scancel, or an administrator)",
	"PREEMPTED":     "was preempted",
	"TIMEOUT":       "reached its time limit",
	"NODE_FAIL":     "ended: its machine failed",
	"BOOT_FAIL":     "ended: its machine failed to boot",
	"FAILED":        "failed",
	"COMPLETED":     "ended: its agent exited",
	"DEADLINE":      "reached its deadline",
	"OUT_OF_MEMORY": "ran out of memory",
	"SUSPENDED":     "was suspended, which Cumulus cannot wait out",
	"STOPPED":       "was stopped, which Cumulus cannot wait out",
}

// endReason is why a node's machine is gone, in words naming Slurm's
// state: "Slurm job 42 was preempted (PREEMPTED)".
func endReason(j slurmJob) string {
	w := endWords[j.State]
	if w == "" {
		w = "ended"
	}
	return "Slurm job " + j.ID + " " + w + " (" + j.State + ")"
}
