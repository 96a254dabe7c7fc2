package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// MaxPortRetries is how many times a job is started again because a port
// it was given was in use on one of its nodes before it fails: each
// attempt gets other ports, so this happens again only on a node whose
// ports are nearly all taken.
const MaxPortRetries = 5

// exitPortBusy is the exit code recorded for a part that did not start
// because its port was in use.
const exitPortBusy = -1

// PortBusy records that a node's part of the job did not start because a
// port the attempt gave it to listen on (the rendezvous port, an MPI
// launcher's) was in use on the node: the attempt ends, the node is free
// again, and the job is queued to start again on other ports without
// using one of its failure retries. After MaxPortRetries such restarts the
// job fails. A report of another attempt only frees the node.
func PortBusy(ctx context.Context, q store.Querier, j store.Job, node string, attempt, port int, at time.Time) error {
	rank := rankOf(j, node)
	if attempt != j.Attempt || rank < 0 || api.JobTerminal(j.Doc.Properties.Status) {
		return exited(ctx, q, j, false, Part{Node: node, Attempt: attempt, Code: exitPortBusy}, 0, at)
	}
	if j.Exits == nil {
		j.Exits = map[string]int{}
	}
	j.Exits[node] = exitPortBusy // released with the others that ended
	reason := fmt.Sprintf("port %d was in use on node %s", port, node)
	if len(j.Nodes) > 1 {
		reason = fmt.Sprintf("port %d was in use on node %s (node rank %d of %d)", port, node, rank, len(j.Nodes))
	}
	j.PortRetries++
	if j.PortRetries > MaxPortRetries && j.Doc.Properties.Status != api.JobCancelRequested {
		return endAttemptFailed(ctx, q, j, reason, fmt.Sprintf("%s; ports were in use %d times, giving up", reason, j.PortRetries), at)
	}
	return Requeue(ctx, q, j, reason+"; started again on other ports", 0, at)
}

// endAttemptFailed ends the job's attempt (why) and the job as Failed
// (reason) for a cause outside its command, freeing the nodes whose parts
// ended.
func endAttemptFailed(ctx context.Context, q store.Querier, j store.Job, why, reason string, at time.Time) error {
	p := &j.Doc.Properties
	if k := len(p.Attempts); k > 0 && p.Attempts[k-1].Ended == nil {
		p.Attempts[k-1].Ended, p.Attempts[k-1].Reason = &at, why
	}
	if err := releaseEnded(ctx, q, j, at); err != nil {
		return err
	}
	j.Nodes, j.Exits, j.MPIDone = nil, nil, false
	j.Doc.SetStatus(api.JobFailed, at, reason)
	return store.UpdateJob(ctx, q, &j)
}
