package dispatch

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Retries bound how often a job starts again after its node failed
// (MaxAttempts, counting every start) or was preempted (MaxPreemptions).
type Retries struct {
	MaxAttempts    int
	MaxPreemptions int
}

// DefaultRetries are lifecycle's defaults.
func DefaultRetries() Retries {
	return Retries{MaxAttempts: lifecycle.DefaultMaxAttempts, MaxPreemptions: lifecycle.DefaultMaxPreemptions}
}

// Outcome is what a write means for others: Changed says jobs or nodes
// changed (the controllers look again), Wake names the nodes whose held
// polls should look again (they may have to stop a job), Rows that an exit
// was of a parallel step that appends rows to an output (once the step has
// ended, the rows are to be filed there).
type Outcome struct {
	Changed bool
	Wake    []string
	Rows    bool
}

// exitNeverStarted is the exit code recorded for a part of a job that a
// node never started.
const exitNeverStarted = -1

// ApplyJobState records a phase an agent on node nodeID reports for one
// of its jobs (in a poll or an event), inside the caller's transaction.
// Reports of jobs the store no longer has are ignored. An exit of the
// node's current attempt on an evicted node is a preemption, and one the
// agent reports because its node was stopped requeues the job.
func ApplyJobState(ctx context.Context, q store.Querier, nodeID string, st agentapi.JobState, r Retries, now time.Time) (Outcome, error) {
	j, err := store.GetJobByUID(ctx, q, st.UID)
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Wake: j.Nodes} // the job's nodes before the change
	switch st.Phase {
	case agentapi.PhaseRunning:
		if st.Started.IsZero() {
			break // accepted, still preparing (code, inputs, image): the job stays Preparing
		}
		before := j.Doc.Properties.Status
		if err := lifecycle.StartedIn(ctx, q, &j, nodeID, st.Attempt, st.Started.UTC()); err != nil {
			return Outcome{}, err
		}
		out.Changed = before != api.JobRunning
	case agentapi.PhaseExited:
		at := orNow(st.Ended, now)
		out.Changed = true
		if j.Doc.IsParallel() {
			rows, _ := j.Doc.ParallelRows()
			out.Rows = rows != ""
		}
		n, err := store.GetNode(ctx, q, nodeID)
		current := err == nil && n.JobID == j.UID && st.Attempt == j.Attempt
		evicted, gone := current && !n.Evicted.IsZero(), current && st.NodeStopped
		// A job that ended before its agent told it running (a short job
		// whose start and end one poll carries) ran all the same: its
		// history shows Running before it ends.
		started := !st.Started.IsZero()
		noted := noteEmptyOutputs(&j, nodeID, st)
		if started && (evicted || gone) {
			// Written first: a preemption and a requeue read the job again.
			if err := lifecycle.StartedIn(ctx, q, &j, nodeID, st.Attempt, st.Started.UTC()); err != nil {
				return Outcome{}, err
			}
		}
		if noted && (evicted || gone || st.PortBusy > 0) {
			// As above (StartedIn's write, when it made one, wrote them
			// too; this one is a write of the same body).
			if err := store.UpdateJob(ctx, q, &j); err != nil {
				return Outcome{}, err
			}
		}
		switch {
		case evicted:
			err = lifecycle.Preempted(ctx, q, nodeID, r.MaxPreemptions, at)
		case gone:
			// The machine went away under the job (its leaving notice may
			// not have reached a server that was down): requeue, not fail.
			err = lifecycle.MachineGone(ctx, q, n, stoppedFromOutside, r.MaxAttempts, r.MaxPreemptions, at)
		case st.PortBusy > 0:
			err = lifecycle.PortBusy(ctx, q, j, nodeID, st.Attempt, st.PortBusy, at)
		default:
			part := lifecycle.Part{Node: nodeID, Attempt: st.Attempt, Code: st.ExitCode, Reason: st.Reason,
				Mpirun: st.MPIRole == agentapi.MPIRoleMpirun, Launcher: st.MPIRole == agentapi.MPIRoleLauncher, Noted: noted}
			if started {
				part.Started = st.Started.UTC() // one write
			}
			err = lifecycle.PartEnded(ctx, q, j, part, r.MaxAttempts, at)
		}
		if err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// noteEmptyOutputs notes on j the outputs an exit report says node nodeID
// left empty (agentapi.JobState.EmptyOutputs), as the server would keep
// their uploads: outputs the job declares and the default one, of an
// attempt the node ran, at its rank. The checkpoint is left out (an empty
// one is none: nothing to resume from), as is any other name (an upload
// of it would be refused). It reports whether it noted one.
func noteEmptyOutputs(j *store.Job, nodeID string, st agentapi.JobState) bool {
	if len(st.EmptyOutputs) == 0 {
		return false
	}
	rank := RankIn(*j, nodeID, st.Attempt)
	if rank < 0 {
		return false
	}
	noted := false
	for _, name := range st.EmptyOutputs {
		if !Declares(*j, name) {
			continue
		}
		e := store.EmptyOutput{Name: name, Attempt: st.Attempt, Rank: rank}
		if slices.Contains(j.EmptyOutputs, e) {
			continue
		}
		j.EmptyOutputs = append(slices.Clip(j.EmptyOutputs), e) // the slice may be shared with a cache
		noted = true
	}
	return noted
}

// Declares reports whether job j has an output called name that its nodes
// upload: the default one or one it declares (not the checkpoint, which
// every job may save).
func Declares(j store.Job, name string) bool {
	_, declared := j.Doc.Properties.Outputs[name]
	return declared || name == agentapi.DefaultOutput
}

// EmptyParts are the parts of output name that job j's nodes left empty
// (noted from their exit reports), as files.Outputs takes them.
func EmptyParts(j store.Job, name string) []files.Part {
	var out []files.Part
	for _, e := range j.EmptyOutputs {
		if e.Name == name {
			out = append(out, files.Part{Attempt: e.Attempt, Rank: e.Rank})
		}
	}
	return out
}

// EmptyNames are the names of the outputs job j's nodes left empty.
func EmptyNames(j store.Job) []string {
	var out []string
	for _, e := range j.EmptyOutputs {
		if !slices.Contains(out, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

// RankIn is node nodeID's rank in an attempt of job j, -1 when the node
// did not run that attempt.
func RankIn(j store.Job, nodeID string, attempt int) int {
	if at := j.Doc.Properties.Attempts; attempt >= 1 && attempt <= len(at) && at[attempt-1].Number == attempt {
		return slices.Index(at[attempt-1].Nodes, nodeID)
	}
	if attempt >= 1 && attempt == j.Attempt {
		return slices.Index(j.Nodes, nodeID)
	}
	return -1
}

// orNow is the time an agent reported, or now when it reported none.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		t = now
	}
	return t.UTC()
}

// ReleaseStale frees node nodeID from job uid, which its agent does not
// run (see Plan.Release), inside the caller's transaction: a preempted
// node's part counts as preempted, the part of a job still running there
// as ended without starting. It reports whether the node still held the
// job.
func ReleaseStale(ctx context.Context, q store.Querier, nodeID, uid string, r Retries, now time.Time) (bool, error) {
	n, err := store.GetNode(ctx, q, nodeID)
	if err != nil || n.JobID != uid {
		return false, err
	}
	if !n.Evicted.IsZero() {
		return true, lifecycle.Preempted(ctx, q, nodeID, r.MaxPreemptions, now)
	}
	if j, err := store.GetJobByUID(ctx, q, uid); err == nil && slices.Contains(j.Nodes, nodeID) && !api.JobTerminal(j.Doc.Properties.Status) {
		return true, lifecycle.Exited(ctx, q, j, nodeID, j.Attempt, exitNeverStarted, "the node never started it", now)
	}
	n.JobID = ""
	if n.State == api.NodeRunning {
		n.State, n.IdleSince = api.NodeIdle, now
	}
	return true, store.PutNode(ctx, q, n)
}
