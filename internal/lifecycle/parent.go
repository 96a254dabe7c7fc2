package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A parent job (a sweep) holds no nodes: its children do, and its
// controller moves its status as they go. These are its transitions.

// ParentRunning marks parent job j Running when it started its first child
// (its start time is then), and writes j with whatever else its controller
// changed on it. An ended job is written unchanged in status.
func ParentRunning(ctx context.Context, q store.Querier, j *store.Job, at time.Time) error {
	p := &j.Doc.Properties
	if !api.JobTerminal(p.Status) && p.Status != api.JobRunning && p.Status != api.JobCancelRequested {
		j.Doc.SetStatus(api.JobRunning, at, "")
		if p.StartTime == nil {
			p.StartTime = &at
		}
	}
	return store.UpdateJob(ctx, q, j)
}

// ParentEnded ends parent job j with status (Completed, Failed or Canceled)
// and why, and writes j with whatever else its controller changed on it. An
// ended job keeps its end.
func ParentEnded(ctx context.Context, q store.Querier, j *store.Job, status, reason string, at time.Time) error {
	if !api.JobTerminal(status) {
		return fmt.Errorf("job %s cannot end as %s", j.Doc.Name, status)
	}
	if !api.JobTerminal(j.Doc.Properties.Status) {
		j.Doc.SetStatus(status, at, reason)
	}
	return store.UpdateJob(ctx, q, j)
}

// Abandon fails a job that has not ended, whatever it was doing, because
// what it runs on is gone (its compute was deleted); its nodes are removed
// by the caller. An ended job is left as it is.
func Abandon(ctx context.Context, q store.Querier, j *store.Job, reason string, at time.Time) error {
	if api.JobTerminal(j.Doc.Properties.Status) {
		return nil
	}
	if err := releaseEnded(ctx, q, *j, at); err != nil {
		return err
	}
	j.Doc.SetStatus(api.JobFailed, at, reason)
	return store.UpdateJob(ctx, q, j)
}
