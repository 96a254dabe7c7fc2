package lifecycle

import (
	"context"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A parallel step's nodes do not depend on each other: each asks for
// mini-batches on its own. A node lost while the others still run costs
// the step only the mini-batches in flight there, which go back to the
// queue at once (not counted as a failed try); the step goes on on the
// nodes it has left. Only when it has none left does it queue again, as
// any job does.

// lostNodeMarker is the exit recorded for a parallel step's node that was
// lost: its part is over, and the step does not fail for it.
const lostNodeMarker = -1

// parallelGoesOn reports whether parallel job j keeps running without
// node: another node of its attempt still runs its part.
func parallelGoesOn(j store.Job, node string) bool {
	if !j.Doc.IsParallel() || j.Doc.Properties.Status == api.JobCancelRequested {
		return false
	}
	for _, n := range j.Nodes {
		if _, ended := j.Exits[n]; n != node && !ended {
			return true
		}
	}
	return false
}

// loseParallelNode ends node's part of parallel job j: its mini-batches in
// flight go back to the queue, and the step runs on without it.
func loseParallelNode(ctx context.Context, q store.Querier, j store.Job, node string, at time.Time) error {
	if err := releaseBatches(ctx, q, j.UID, node); err != nil {
		return err
	}
	if j.Exits == nil {
		j.Exits = map[string]int{}
	}
	j.Exits[node] = lostNodeMarker
	return store.UpdateJob(ctx, q, &j)
}

// releaseBatches puts the mini-batches a node runs for a step back in the
// queue, without counting the try.
func releaseBatches(ctx context.Context, q store.Querier, uid, node string) error {
	held, err := store.NodeBatches(ctx, q, uid, node)
	if err != nil {
		return err
	}
	for _, b := range held {
		b.State, b.Node, b.Tries, b.Retries = store.BatchPending, "", max(b.Tries-1, 0), b.Retries+1
		if err := store.PutBatch(ctx, q, b); err != nil {
			return err
		}
	}
	return nil
}

// releaseAllBatches puts every mini-batch of a parallel step's attempt
// that is still running back in the queue, for its next attempt: none
// waits for the lease of a node that no longer runs it.
func releaseAllBatches(ctx context.Context, q store.Querier, j store.Job) error {
	if !j.Doc.IsParallel() {
		return nil
	}
	for _, n := range j.Nodes {
		if err := releaseBatches(ctx, q, j.UID, n); err != nil {
			return err
		}
	}
	return nil
}

// parallelReason is why a parallel step's node ended its part in failure,
// when the step's thresholds were passed.
func parallelReason(j store.Job) string {
	if p := j.Doc.Properties.ParallelSpec; p != nil && p.Parallel != nil {
		return p.Parallel.Verdict
	}
	return ""
}
