package decide

import (
	"slices"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// holdForBudget is plan p of cluster c while budgets' actions are in force
// (c.Budgets): no new nodes (jobs that would have started on them wait,
// and Blocked says why: the budgets); when one of them scales to the
// minimum, every idle node above the cluster's minimum goes now, whatever
// its idle time. Jobs placed on nodes that already exist still start, and
// running jobs finish.
func holdForBudget(p Plan, c Cluster) Plan {
	target := p.Target - p.Create
	p.Create, p.CreateImages = 0, nil
	p.QuotaShort, p.QuotaWait = 0, nil // quota is not what holds them now, nor devices
	p.GPUShort, p.GPUWait = 0, nil
	toMin := false
	for _, b := range c.Budgets {
		toMin = toMin || b.ToMin
	}
	started := map[string]bool{}
	busy := map[string]bool{}
	for _, a := range p.Assign {
		started[a.JobID] = true
		for _, id := range a.NodeIDs {
			busy[id] = true
		}
	}
	for _, j := range c.Queued {
		if !started[j.ID] {
			p.Blocked = nil // the budgets are what holds the queue now
			for _, b := range c.Budgets {
				p.Blocked = append(p.Blocked, api.Block{Kind: api.BlockBudget, Budget: &b})
			}
			break
		}
	}
	if toMin {
		for _, n := range c.Nodes {
			if target <= c.Min {
				break
			}
			if n.State == api.NodeIdle && n.JobID == "" && !busy[n.ID] && !slices.Contains(p.Remove, n.ID) {
				p.Remove = append(p.Remove, n.ID)
				target--
			}
		}
	}
	p.Target = max(target, 0)
	return p
}
