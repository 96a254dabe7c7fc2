package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/store"
)

// ExplainLoss adds what the provider says of a node's end (Slurm: its job
// was cancelled, preempted, reached its time limit) to the reason of the
// attempt that ended when the node was lost, inside the caller's
// transaction. The node's agent usually tells first, in words of its own
// (stopped from outside, preempted), when its machine signals it; the
// provider knows why only once the machine is gone. n is the lost node's
// record (preempted, unusable, or leaving since); its LostJob names the
// job. The node's reason gets it too. Nothing changes when there is no
// such attempt or its reason says it already.
func ExplainLoss(ctx context.Context, q store.Querier, n store.Node, reason string) error {
	if n.LostJob == "" || reason == "" {
		return nil
	}
	j, err := store.GetJobByUID(ctx, q, n.LostJob)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	p := &j.Doc.Properties
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		a := &p.Attempts[i]
		if !slices.Contains(a.Nodes, n.ID) {
			continue
		}
		if a.Ended == nil || a.Reason == "" || strings.Contains(a.Reason, reason) {
			return nil
		}
		was := a.Reason
		a.Reason = was + ": " + reason
		if strings.HasPrefix(p.StatusMessage, was) { // "…; queued again", "…; gave up after 3 attempts"
			p.StatusMessage = a.Reason + strings.TrimPrefix(p.StatusMessage, was)
		}
		if err := store.UpdateJob(ctx, q, &j); err != nil {
			return err
		}
		if !strings.Contains(n.Reason, reason) {
			n.Reason = strings.TrimPrefix(n.Reason+": "+reason, ": ")
			return store.PutNode(ctx, q, n)
		}
		return nil
	}
	return nil
}
