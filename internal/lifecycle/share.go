package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Regroup puts a compute's jobs that are not finished in their fair-share
// groups under its queue policy now (none when it is not fair share), and
// forgets the usage of the old groups; called when the compute's grouping
// changed (fair share turned on or off, or another grouping tag), in the
// transaction that stores the change. It returns how many jobs moved.
func Regroup(ctx context.Context, q store.Querier, comp api.Compute) (int, error) {
	policy := comp.Queue()
	jobs, err := store.JobsToRegroup(ctx, q, comp.ID)
	if err != nil {
		return 0, err
	}
	parents := map[string]*api.Job{}
	moved := 0
	for i := range jobs {
		j := &jobs[i]
		var parent *api.Job
		if name := j.Doc.Properties.ParentJobName; name != "" && policy.FairShare {
			if parent = parents[name]; parent == nil {
				p, err := store.GetJob(ctx, q, j.Parent, name)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return moved, err
				}
				if err == nil {
					parent = &p.Doc
					parents[name] = parent
				}
			}
		}
		g := groupOf(policy, &j.Doc, parent)
		if old := j.Doc.Properties.FairShareGroup; (old == nil) == (g == nil) && (g == nil || *old == *g) {
			continue
		}
		j.Doc.Properties.FairShareGroup = g
		if err := store.UpdateJob(ctx, q, j); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, store.DeleteShareUsage(ctx, q, comp.ID)
}

// Grouping is what puts a compute's jobs in groups: "" when its queue is
// not fair share, else its FairShareBy. A change of it regroups the jobs.
func Grouping(c *api.Compute) string {
	q := c.Queue()
	if !q.FairShare {
		return ""
	}
	return q.By
}

// Reclaim stops job uid's current attempt for another job, as the
// compute's queue policy decided (why): the attempt ends with the reason,
// and the job goes back to the queue, ahead of its group's later jobs as
// before, without using a retry. Its nodes keep it until their agents
// have stopped it, with the compute's preemption grace (SIGTERM, its
// checkpoint saved), and are then idle for the job it was stopped for. It
// returns ErrStale when the job no longer runs the attempt the decision
// saw (it ended, was canceled, or was stopped already).
func Reclaim(ctx context.Context, q store.Querier, uid string, words string, at time.Time) (store.Job, error) {
	j, err := store.GetJobByUID(ctx, q, uid)
	if err != nil {
		return j, err
	}
	switch j.Doc.Properties.Status {
	case api.JobPreparing, api.JobStarting, api.JobRunning:
	default:
		return j, fmt.Errorf("preempt job %s (%s): %w", j.Doc.Name, j.Doc.Properties.Status, ErrStale)
	}
	if len(j.Nodes) == 0 || slices.Contains(j.Nodes, "") {
		return j, fmt.Errorf("preempt job %s: it holds no node: %w", j.Doc.Name, ErrStale)
	}
	j.Reclaims++
	j.Reclaimed = j.Attempt
	return j, Requeue(ctx, q, j, words, 0, at)
}
