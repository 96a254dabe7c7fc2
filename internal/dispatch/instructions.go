package dispatch

import (
	"fmt"
	"slices"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// View is what the store holds about a polling node: everything
// Instructions decides from.
type View struct {
	// Known is false when the store has no record of the node.
	Known bool
	Node  store.Node
	// Jobs are the jobs the agent reports running and the node's own job,
	// by uid; a uid missing here is not in the store.
	Jobs map[string]store.Job
	// Grace is the preemption grace of the node's compute (read when the
	// node is evicted).
	Grace time.Duration
	// Work is what an assignment of the node's job needs (read when
	// pending reports the job is to be handed to the agent).
	Work Work
}

// Plan is what Instructions decides: the answer for the agent, and what
// the caller writes to the store before answering.
type Plan struct {
	Response agentapi.PollResponse
	// Release names a job the node holds but no longer runs (requeued,
	// ended, preempted) and its agent does not run either: the node is to
	// be freed from it (ReleaseStale). An agent reports every job it has,
	// and a poll is never in flight while it takes an assignment, so no
	// report that it runs the job will come.
	Release string
}

// Instructions decides what a polling agent should do now, given what it
// reported it runs: stop jobs that no longer run on the node, stop jobs of
// a preempted node, and an attempt the queue policy stopped for another
// job, with its compute's grace, start the node's job when the
// agent does not run it yet, and leave when the node is being removed.
func Instructions(v View, reported []agentapi.JobState) Plan {
	var p Plan
	if !v.Known {
		p.Response.Unknown = true
		return p
	}
	n := v.Node
	runs := false
	stop := func(uid, why string) {
		p.Response.Cancel = append(p.Response.Cancel, uid)
		if why != "canceled" {
			if p.Response.StopReasons == nil {
				p.Response.StopReasons = map[string]string{}
			}
			p.Response.StopReasons[uid] = why
		}
	}
	for _, st := range reported {
		if st.Phase != agentapi.PhaseRunning {
			continue
		}
		j, found := v.Jobs[st.UID]
		switch {
		case found && st.UID == n.JobID && reclaimed(j, st.Attempt):
			// The queue policy stopped this attempt for another job: it
			// stops as on a preempted node, with the grace to save its
			// checkpoint; the node is released when it reports the end.
			p.Response.Preempt = append(p.Response.Preempt, st.UID)
			p.Response.PreemptGrace = v.Grace
			if a := j.Doc.Properties.Attempts; len(a) > 0 {
				if p.Response.StopReasons == nil {
					p.Response.StopReasons = map[string]string{}
				}
				p.Response.StopReasons[st.UID] = a[len(a)-1].Reason
			}
			runs = true
		case !found || st.UID != n.JobID || st.Attempt != j.Attempt || !runsOn(j, n.ID):
			stop(st.UID, stopReason(j, found, st, n.ID))
		case j.MPIDone && j.Nodes[0] != n.ID:
			// Node 0's mpirun ended: the launch is over, and this node's
			// launcher (held until now) ends with it.
			stop(st.UID, LaunchOver)
		case !n.Evicted.IsZero():
			p.Response.Preempt = append(p.Response.Preempt, st.UID)
			p.Response.PreemptGrace = v.Grace
			runs = true
		default:
			runs = true
		}
	}
	switch {
	case n.JobID != "" && !runs:
		j, found := v.Jobs[n.JobID]
		if found && reportedAttempt(reported, n.JobID, j.Attempt) {
			break // it runs (or just ended) this attempt
		}
		if found && partEnded(j, n.ID) && runsOn(j, n.ID) && n.Evicted.IsZero() {
			break // its part ended: the node stays the job's until the job ends
		}
		if j, ok := pending(v, reported); ok {
			a := Assignment(j, n, v.Work)
			p.Response.Assign = &a
			break
		}
		p.Release = n.JobID
	case n.JobID == "" && (n.State == api.NodeLeaving || n.State == api.NodeUnusable || n.State == api.NodePreempted):
		p.Response.Shutdown = true
	}
	return p
}

// reclaimed reports whether attempt of job j was stopped by its compute's
// queue policy (lifecycle.Reclaim) and the job has not ended since: a
// cancel or the end of the job stops it as those do.
func reclaimed(j store.Job, attempt int) bool {
	st := j.Doc.Properties.Status
	return j.Reclaimed > 0 && j.Reclaimed == attempt && !api.JobTerminal(st) && st != api.JobCancelRequested
}

// stopReason says why an agent stops a job it runs on a node: what its
// log and exit report will say.
func stopReason(j store.Job, found bool, st agentapi.JobState, nodeID string) string {
	p := j.Doc.Properties
	switch {
	case !found:
		return "the job no longer exists"
	case p.Status == api.JobCancelRequested || p.Status == api.JobCanceled:
		return "canceled"
	case st.Attempt != j.Attempt:
		return fmt.Sprintf("attempt %d was replaced by attempt %d", st.Attempt, j.Attempt)
	case p.Status == api.JobFailed:
		return "stopped because the job failed: " + p.StatusMessage
	case api.JobTerminal(p.Status):
		return "the job ended (" + p.Status + ")"
	case !slices.Contains(j.Nodes, nodeID):
		return "the job no longer runs on this node"
	}
	return "canceled"
}

// pending returns the node's job when the agent is to be given it: the job
// still runs on the node (not ended, not canceled, the node not evicted)
// and the agent does not report its current attempt.
func pending(v View, reported []agentapi.JobState) (store.Job, bool) {
	n := v.Node
	j, found := v.Jobs[n.JobID]
	if n.JobID == "" || !found || reportedAttempt(reported, j.UID, j.Attempt) {
		return j, false
	}
	return j, runsOn(j, n.ID) && n.Evicted.IsZero() && !partEnded(j, n.ID)
}

// partEnded reports whether the node's part of the job's current attempt
// has ended (the node is held for the job until it ends).
func partEnded(j store.Job, nodeID string) bool {
	_, ended := j.Exits[nodeID]
	return ended
}

// LaunchOver is why a node's MPI launcher is stopped once node rank 0's
// mpirun has ended.
const LaunchOver = "the job's mpirun on node rank 0 ended; this node's MPI launcher is no longer needed"

// runsOn reports whether the job's current attempt still runs on the
// node: it has not ended, is not being canceled, and the node has a rank.
func runsOn(j store.Job, nodeID string) bool {
	st := j.Doc.Properties.Status
	return !api.JobTerminal(st) && st != api.JobCancelRequested && slices.Contains(j.Nodes, nodeID)
}

// reportedAttempt reports whether the agent reported this attempt of a
// job, in any phase.
func reportedAttempt(reported []agentapi.JobState, uid string, attempt int) bool {
	for _, st := range reported {
		if st.UID == uid && st.Attempt == attempt {
			return true
		}
	}
	return false
}

// news reports whether a poll's answer asks the agent to do something,
// so it is sent at once rather than held.
func news(r agentapi.PollResponse) bool {
	return r.Assign != nil || len(r.Cancel) > 0 || len(r.Preempt) > 0 || r.Shutdown || r.Unknown
}
