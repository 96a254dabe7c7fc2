package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// quotaView is what quota allowed a cluster when its pass began.
type quotaView struct {
	location string
	limits   quota.Limits
	known    bool // the limits were read
	headroom int  // nodes quota alone allowed; -1 when not known
}

// shortfall is what quota keeps a cluster from, with the location's usage
// after the pass's own creations and removals.
type shortfall struct {
	quota.Need // for the nodes the plan could not create
	location   string
	limits     quota.Limits
	usage      quota.Usage
}

// shortfall returns what quota keeps the cluster from, or nil when quota
// is not what holds it back: the plan was not cut, or the cut came from
// the provider's backoff (headroom is what the decision was given).
func (qv quotaView) shortfall(comp api.Compute, plan decide.Plan, headroom int, u quota.Usage) *shortfall {
	if plan.QuotaShort <= 0 || !qv.known || headroom != qv.headroom {
		return nil
	}
	a := comp.Aml()
	need, ok := quota.NeedFor(qv.limits, u, a.VMSize, a.VMPriority == api.PriorityLowPriority, plan.QuotaShort)
	if !ok {
		return nil
	}
	return &shortfall{Need: need, location: qv.location, limits: qv.limits, usage: u}
}

// forNodes is the shortfall of n nodes of the same size.
func (s *shortfall) forNodes(n int) quota.Need {
	need, _ := quota.NeedFor(s.limits, s.usage, s.Size, s.LowPriority, n)
	return need
}

// quotaError is the compute's error while quota holds it below what it wants.
func quotaError(plan decide.Plan, s shortfall) string {
	return fmt.Sprintf("quota keeps the cluster at %d of the %d nodes it needs: %s; it grows when other clusters free cores or the quota is raised ('%s')",
		plan.Target, plan.Target+plan.QuotaShort, s.Describe(s.location), quota.RaiseCommand(s.Quota, s.location))
}

// blockedBesidesQuota is plan.Blocked without its quota part, which
// QuotaExceeded explains (or which came from the provider's backoff, which
// NodeProvisioningFailed explains).
func blockedBesidesQuota(plan decide.Plan) string {
	if plan.QuotaShort <= 0 {
		return plan.Blocked
	}
	var kept []string
	for _, part := range strings.Split(plan.Blocked, "; ") {
		if !strings.HasPrefix(part, "quota allows ") {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "; ")
}

// recordQuotaWaits sets the status message of each queued job that waits
// for quota (naming the family, the cores it needs and the cores free), for
// the machine's GPUs (the devices a node needs, how many are free, who
// holds the others) or for a budget (naming it) and clears it from jobs
// that no longer wait. The status itself is
// not changed; a job that starts loses the message with its new status. A
// job is written only when its message changes; one changed meanwhile is
// left to the next pass.
func (c *Clusters) recordQuotaWaits(ctx context.Context, queued []store.QueuedJob, plan decide.Plan, short *shortfall, budget string) error {
	want := map[string]string{}
	if short != nil {
		for _, w := range plan.QuotaWait {
			want[w.JobID] = api.QuotaWaitPrefix + short.forNodes(w.Nodes).Describe(short.location)
		}
	}
	if plan.GPUBlock != nil {
		for _, w := range plan.GPUWait {
			want[w.JobID] = api.GPUWaitPrefix + plan.GPUBlock.String()
		}
	}
	started := map[string]bool{}
	for _, a := range plan.Assign {
		started[a.JobID] = true
	}
	if budget != "" { // a spent budget holds every job that did not start
		for _, qj := range queued {
			if !started[qj.UID] {
				want[qj.UID] = api.BudgetWaitPrefix + budget
			}
		}
	}
	var errs []error
	for _, qj := range queued {
		msg, waits := want[qj.UID]
		if started[qj.UID] || (!waits && !qj.QuotaWait) {
			continue // no message, or one about something else: keep it
		}
		j, err := store.GetJobByUID(ctx, c.DB.Q(), qj.UID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cur := j.Doc.Properties.StatusMessage
		if !waits && !api.WaitsForQuota(cur) {
			continue
		}
		if msg == cur || j.Doc.Properties.Status != api.JobQueued {
			continue
		}
		j.Doc.Properties.StatusMessage = msg
		err = store.UpdateJob(ctx, c.DB.W(), &j)
		if err != nil && !errors.Is(err, store.ErrETagMismatch) {
			errs = append(errs, fmt.Errorf("job %s status message: %w", j.Doc.Name, err))
		}
	}
	return errors.Join(errs...)
}
