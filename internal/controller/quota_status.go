package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"

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
// is not what holds it back.
func (qv quotaView) shortfall(comp api.Compute, plan decide.Plan, u quota.Usage) *shortfall {
	if plan.QuotaShort <= 0 || !qv.known {
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

// recordQuotaWaits sets the reason of each queued job that waits for quota
// (a value naming the family, the cores it needs and the cores free) or for
// the machine's GPUs (the devices a node needs, how many are free, who
// holds the others) — which jobs wait for those rather than maxNodeCount is
// decided job by job — and clears it from jobs that no longer wait. The
// status itself is not changed; a job that starts loses its reason with its
// new status. A job is written only when its reason changes; one changed
// meanwhile is left to the next pass.
func (c *Clusters) recordQuotaWaits(ctx context.Context, queued []store.QueuedJob, plan decide.Plan, short *shortfall) error {
	want := map[string]*api.Block{}
	if short != nil {
		for _, w := range plan.QuotaWait {
			want[w.JobID] = &api.Block{Kind: api.BlockQuota, Job: w.JobID, Quota: api.QuotaNeedOf(short.forNodes(w.Nodes), short.location)}
		}
	}
	if need := gpuNeed(plan); need != nil {
		for _, w := range plan.GPUWait {
			want[w.JobID] = &api.Block{Kind: api.BlockGPUs, Job: w.JobID, GPUs: need}
		}
	}
	started := map[string]bool{}
	for _, a := range plan.Assign {
		started[a.JobID] = true
	}
	var errs []error
	for _, qj := range queued {
		reason, waits := want[qj.UID]
		if started[qj.UID] || (!waits && !qj.QuotaWait) {
			continue // no reason of its own now or before
		}
		j, err := store.GetJobByUID(ctx, c.DB.Q(), qj.UID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p := &j.Doc.Properties
		if p.Status != api.JobQueued || reflect.DeepEqual(reason, p.Waiting) {
			continue
		}
		if p.Waiting == nil && reason == nil {
			// Flagged by an earlier version, which wrote the reason as the
			// status message itself.
			p.StatusMessage = ""
		}
		p.Waiting = reason
		err = store.UpdateJob(ctx, c.DB.W(), &j)
		if err != nil && !errors.Is(err, store.ErrETagMismatch) {
			errs = append(errs, fmt.Errorf("job %s reason: %w", j.Doc.Name, err))
		}
	}
	return errors.Join(errs...)
}
