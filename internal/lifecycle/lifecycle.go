// Package lifecycle holds the state transitions of jobs and nodes that more
// than one actor makes (the API on agent reports, the cluster controller on
// decisions and timeouts). Each function runs inside the caller's store
// transaction and re-checks the state it reads, so a stale decision is
// refused (ErrStale) rather than applied.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// ErrStale means the job or node changed since the decision was made.
var ErrStale = errors.New("state changed since the decision")

// DefaultMaxAttempts is how many times a job is started before a failure
// of its node (not of its own command) makes it fail for good.
const DefaultMaxAttempts = 3

// Assign starts the job's next attempt on the given idle nodes (rank order).
func Assign(ctx context.Context, q store.Querier, uid string, nodeIDs []string, now time.Time) (store.Job, error) {
	j, err := store.GetJobByUID(ctx, q, uid)
	if err != nil {
		return j, err
	}
	if j.Doc.Properties.Status != api.JobQueued || len(nodeIDs) != j.Doc.InstanceCount() {
		return j, fmt.Errorf("assign job %s: %w", j.Doc.Name, ErrStale)
	}
	claimed, err := store.ClaimIdleNodes(ctx, q, nodeIDs, j.UID)
	if err != nil {
		return j, err
	}
	if !claimed {
		return j, fmt.Errorf("assign job %s: a node is no longer idle: %w", j.Doc.Name, ErrStale)
	}
	j.Attempt++
	j.Nodes = slices.Clone(nodeIDs)
	j.Exits, j.MPIDone = nil, false
	j.Doc.Properties.Attempts = append(j.Doc.Properties.Attempts, api.Attempt{Number: j.Attempt, Nodes: j.Nodes, Assigned: &now})
	j.Doc.SetStatus(api.JobPreparing, now, "")
	return j, store.UpdateJob(ctx, q, &j)
}

// rankOf is the node's rank in the job's current attempt, or -1.
func rankOf(j store.Job, node string) int { return slices.Index(j.Nodes, node) }

// Started records that a node began running its part of the job.
func Started(ctx context.Context, q store.Querier, j store.Job, node string, attempt int, at time.Time) error {
	return StartedIn(ctx, q, &j, node, attempt, at)
}

// StartedIn is Started updating j in place (its new status and version),
// for a caller that writes the job again in the same transaction.
func StartedIn(ctx context.Context, q store.Querier, j *store.Job, node string, attempt int, at time.Time) error {
	if !markStarted(j, node, attempt, at) {
		return nil
	}
	return store.UpdateJob(ctx, q, j)
}

// markStarted is Started's change to j, not written; it reports whether
// it changed j.
func markStarted(j *store.Job, node string, attempt int, at time.Time) bool {
	if attempt != j.Attempt || rankOf(*j, node) < 0 {
		return false // a report of an older attempt: ignore
	}
	p := &j.Doc.Properties
	if p.Status != api.JobPreparing && p.Status != api.JobStarting {
		return false
	}
	a := &p.Attempts[len(p.Attempts)-1]
	if a.Started == nil {
		a.Started = &at
	}
	if p.StartTime == nil {
		p.StartTime = &at
	}
	j.Doc.SetStatus(api.JobRunning, at, "")
	return true
}

// Exited records that a node's part of the job ended. The job ends when
// every node has ended, or at once when one fails (the others are told to
// stop by their next poll). A node of a job of several nodes whose part
// ended stays the job's until the job ends (a gang holds its nodes): it
// is neither given other work nor scaled down meanwhile. When the job
// ends, the nodes whose parts ended are released: idle again, or still
// leaving when they were draining. A late report of an older attempt from
// a node that holds the current attempt's rank changes nothing: that rank
// still runs there.
func Exited(ctx context.Context, q store.Querier, j store.Job, node string, attempt, code int, reason string, at time.Time) error {
	return exited(ctx, q, j, false, Part{Node: node, Attempt: attempt, Code: code, Reason: reason}, 0, at)
}

// StartedExited records both that a node began its part of the job at
// started and that the part ended, writing the job once: a short job's
// start and end that one agent report carries.
func StartedExited(ctx context.Context, q store.Querier, j store.Job, node string, attempt int, started time.Time, code int, reason string, at time.Time) error {
	return PartEnded(ctx, q, j, Part{Node: node, Attempt: attempt, Code: code, Reason: reason, Started: started}, 0, at)
}

// Part is what a node's agent reports of its part of a job that ended.
type Part struct {
	Node    string
	Attempt int
	Code    int
	Reason  string
	// Started is when the part started, when the same report carries it
	// (zero: recorded already).
	Started time.Time
	// Mpirun: the part was mpirun over the job's nodes (node rank 0 of an
	// MPI launch); its end is the job's end.
	Mpirun bool
	// Launcher: the part was the launcher of node rank 0's MPI daemon on
	// this node, which mpirun needs until it ends.
	Launcher bool
	// Noted: the job given to PartEnded holds a change of the caller's
	// not written yet (the outputs the part left empty); it is written
	// with the part's end, or alone when the end changes nothing.
	Noted bool
}

// PartEnded is Exited for a report that says more (see Part): a part's
// start and end in one report, and the parts of an MPI launch. A launcher
// that ended with 0 while node rank 0's mpirun still ran breaks the
// attempt (mpirun cannot finish without that node): the attempt ends with
// the reason and the job is queued again, or fails once maxAttempts
// attempts were made (0: no bound), as when a node is lost.
func PartEnded(ctx context.Context, q store.Querier, j store.Job, e Part, maxAttempts int, at time.Time) error {
	dirty := !e.Started.IsZero() && markStarted(&j, e.Node, e.Attempt, e.Started)
	return exited(ctx, q, j, dirty || e.Noted, e, maxAttempts, at)
}

// exited is PartEnded; dirty says j holds a change not yet written.
func exited(ctx context.Context, q store.Querier, j store.Job, dirty bool, e Part, maxAttempts int, at time.Time) error {
	node, code, rank := e.Node, e.Code, rankOf(j, e.Node)
	current := e.Attempt == j.Attempt
	over := rank < 0 || api.JobTerminal(j.Doc.Properties.Status)
	if !current || over {
		if current || over {
			if err := release(ctx, q, node, j.UID, at); err != nil {
				return err
			}
		}
		return writeIf(ctx, q, &j, dirty)
	}
	if j.Exits == nil {
		j.Exits = map[string]int{}
	}
	if _, done := j.Exits[node]; done {
		return writeIf(ctx, q, &j, dirty)
	}
	j.Exits[node] = code
	p := &j.Doc.Properties
	a := &p.Attempts[len(p.Attempts)-1]
	_, mpirunEnded := j.Exits[j.Nodes[0]]
	switch {
	case p.Status == api.JobCancelRequested:
		if len(j.Exits) == len(j.Nodes) || code != 0 {
			endAttempt(a, code, "canceled", at)
			j.Doc.SetStatus(api.JobCanceled, at, "canceled by request")
		}
	case j.MPIDone:
		// mpirun ended with 0: the launchers were told to stop, and how
		// they stopped is not the job's result.
		if len(j.Exits) == len(j.Nodes) {
			endAttempt(a, 0, "", at)
			j.Doc.SetStatus(api.JobCompleted, at, "")
		}
	case code != 0 || strings.HasPrefix(e.Reason, api.CostLimitExceeded): // a job stopped at its cost limit fails whatever its code
		if e.Reason == "" {
			e.Reason = parallelReason(j) // a parallel step past its thresholds
		}
		why := fmt.Sprintf("exit code %d on node %s", code, node)
		if len(j.Nodes) > 1 {
			why = fmt.Sprintf("exit code %d on node %s (node rank %d of %d)", code, node, rank, len(j.Nodes))
		}
		if e.Reason != "" {
			why = e.Reason + " (" + why + ")"
		}
		endAttempt(a, code, why, at)
		j.Doc.SetStatus(api.JobFailed, at, why)
	case e.Launcher && rank > 0 && !mpirunEnded:
		return Requeue(ctx, q, j, fmt.Sprintf("node rank %d (node %s): its MPI launcher ended (exit code 0) while node rank 0's mpirun still ran; mpirun cannot finish without that node",
			rank, node), maxAttempts, at)
	case len(j.Exits) == len(j.Nodes):
		endAttempt(a, 0, "", at)
		j.Doc.SetStatus(api.JobCompleted, at, "")
	case e.Mpirun && rank == 0:
		j.MPIDone = true // the launchers are told to stop (dispatch.Instructions)
	}
	if api.JobTerminal(p.Status) {
		if err := releaseEnded(ctx, q, j, at); err != nil {
			return err
		}
	}
	return store.UpdateJob(ctx, q, &j)
}

// writeIf writes j when it changed.
func writeIf(ctx context.Context, q store.Querier, j *store.Job, changed bool) error {
	if !changed {
		return nil
	}
	return store.UpdateJob(ctx, q, j)
}

func endAttempt(a *api.Attempt, code int, reason string, at time.Time) {
	a.Ended, a.ExitCode, a.Reason = &at, &code, reason
}

// releaseEnded releases the nodes of the job's current attempt whose
// parts have ended (they were held for the job until now).
func releaseEnded(ctx context.Context, q store.Querier, j store.Job, at time.Time) error {
	for _, node := range j.Nodes {
		if _, ended := j.Exits[node]; !ended {
			continue
		}
		if err := release(ctx, q, node, j.UID, at); err != nil {
			return err
		}
	}
	return nil
}

// release frees a node from a job: idle (its idle time restarts now)
// unless it is leaving or gone.
func release(ctx context.Context, q store.Querier, node, uid string, at time.Time) error {
	n, err := store.GetNode(ctx, q, node)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.JobID != uid {
		return nil
	}
	n.JobID = ""
	if n.State == api.NodeRunning {
		n.State, n.IdleSince = api.NodeIdle, at
	}
	return store.PutNode(ctx, q, n)
}

// NodeLost handles a node that is gone or unusable while it ran a job: the
// node becomes unusable with the reason, and its job goes back to the
// queue (a new attempt) or fails once it has used maxAttempts.
func NodeLost(ctx context.Context, q store.Querier, n store.Node, state, reason string, maxAttempts int, at time.Time) error {
	n.Reason = reason
	j, ok, err := detach(ctx, q, n, state, at)
	if err != nil || !ok {
		return err
	}
	if parallelGoesOn(j, n.ID) {
		return loseParallelNode(ctx, q, j, n.ID, at)
	}
	return Requeue(ctx, q, j, reason, maxAttempts, at)
}

// detach puts a node in a final state without its job, and returns that
// job when it still runs there (so the caller requeues or fails it).
func detach(ctx context.Context, q store.Querier, n store.Node, state string, at time.Time) (store.Job, bool, error) {
	uid := n.JobID
	n.State, n.JobID, n.Changed = state, "", at
	if uid != "" {
		n.LostJob = uid
	}
	if err := store.PutNode(ctx, q, n); err != nil {
		return store.Job{}, false, err
	}
	if uid == "" {
		return store.Job{}, false, nil
	}
	j, err := store.GetJobByUID(ctx, q, uid)
	if errors.Is(err, store.ErrNotFound) {
		return j, false, nil
	}
	if err != nil {
		return j, false, err
	}
	return j, !api.JobTerminal(j.Doc.Properties.Status) && rankOf(j, n.ID) >= 0, nil
}

// Requeue ends the job's current attempt for a reason outside the job and
// queues it again, or fails it when its attempts are used up. Its other
// nodes stop their part when they next poll (the job no longer runs there)
// and are released when they report it ended.
func Requeue(ctx context.Context, q store.Querier, j store.Job, reason string, maxAttempts int, at time.Time) error {
	if err := releaseAllBatches(ctx, q, j); err != nil {
		return err
	}
	p := &j.Doc.Properties
	if n := len(p.Attempts); n > 0 && p.Attempts[n-1].Ended == nil {
		p.Attempts[n-1].Ended, p.Attempts[n-1].Reason = &at, reason
	}
	// The nodes whose parts ended are free now. The job's other nodes
	// keep it until their agents report their part stopped (their next
	// poll tells them to stop): they are not handed new work while an old
	// rank may still run there.
	if err := releaseEnded(ctx, q, j, at); err != nil {
		return err
	}
	j.Nodes, j.Exits, j.MPIDone = nil, nil, false
	counted := j.Attempt - j.Preemptions - j.PortRetries - j.Reclaims
	switch {
	case p.Status == api.JobCancelRequested:
		j.Doc.SetStatus(api.JobCanceled, at, "canceled by request")
	case maxAttempts > 0 && counted >= maxAttempts:
		j.Doc.SetStatus(api.JobFailed, at, fmt.Sprintf("%s; gave up after %d attempts", reason, counted))
	default:
		j.Doc.SetStatus(api.JobQueued, at, reason+"; queued again")
	}
	return store.UpdateJob(ctx, q, &j)
}

// RequestCancel cancels a job by request (see CancelBecause).
func RequestCancel(ctx context.Context, q store.Querier, j store.Job, at time.Time) error {
	return CancelBecause(ctx, q, &j, "", at)
}

// CancelBecause cancels a job, saying why ("": by request): at once when
// it holds no node, otherwise by asking its nodes to stop (CancelRequested
// until they report). A sweep or a pipeline, which hold no node, become
// CancelRequested: their controllers cancel their children, then them. j is
// updated as written.
func CancelBecause(ctx context.Context, q store.Querier, j *store.Job, reason string, at time.Time) error {
	p := &j.Doc.Properties
	switch {
	case api.JobTerminal(p.Status) || p.Status == api.JobCancelRequested:
		return nil
	case len(j.Nodes) == 0 && !j.Doc.IsParent():
		if reason == "" {
			reason = "canceled by request before it started"
		}
		j.Doc.SetStatus(api.JobCanceled, at, reason)
	default:
		j.Doc.SetStatus(api.JobCancelRequested, at, reason)
	}
	return store.UpdateJob(ctx, q, j)
}
