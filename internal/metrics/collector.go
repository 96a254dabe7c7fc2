package metrics

import (
	"context"
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/metrics/promtext"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// NodeStates are the values of the state label of cumulus_compute_nodes
// and cumulus_compute_cores; every compute reports each, zeros included,
// so a query sees 0 rather than no series.
var NodeStates = []string{api.NodeRunning, api.NodeIdle, api.NodePreparing, api.NodeLeaving, api.NodePreempted, api.NodeUnusable}

// Quota label values besides the VM family names.
const (
	FamilyTotal         = "total"        // the location-wide pools
	PriorityDedicated   = "dedicated"    // per family and TotalDedicatedCores
	PriorityLowPriority = "low_priority" // TotalLowPriorityCores
)

var (
	famNodes = newGauge(Namespace+"_compute_nodes",
		"Nodes of a compute by state.", "workspace", "compute", "state")
	famCores = newGauge(Namespace+"_compute_cores",
		"Cores (vCPUs) of a compute's nodes by state.", "workspace", "compute", "state")
	famTarget = newGauge(Namespace+"_compute_target_nodes",
		"Nodes the autoscaler wants the compute to have.", "workspace", "compute")
	famMax = newGauge(Namespace+"_compute_max_nodes",
		"The compute's maxNodeCount.", "workspace", "compute")
	famMin = newGauge(Namespace+"_compute_min_nodes",
		"The compute's minNodeCount.", "workspace", "compute")
	famQuotaUsed = newGauge(Namespace+"_quota_used_cores",
		"Cores the clusters of a subscription use in a location, per VM family (family=\"total\": the location-wide pool) and priority.", "subscription", "location", "family", "priority")
	famQuotaLimit = newGauge(Namespace+"_quota_limit_cores",
		"Core quota of a subscription in a location, per VM family (family=\"total\": the location-wide pool) and priority.", "subscription", "location", "family", "priority")
	famJobs = newGauge(Namespace+"_jobs",
		"Jobs of a compute by status.", "workspace", "compute", "status")
	famBudgetSpent = newGauge(Namespace+"_budget_spent",
		"What a budget's scope spent in its current period, in the server's currency, as last judged (every minute).", "workspace", "budget")
	famBudgetAmount = newGauge(Namespace+"_budget_amount",
		"A budget's amount per period, in the server's currency.", "workspace", "budget")
	famBudgetActive = newGauge(Namespace+"_budget_action_active",
		"1 while a budget's action (stop scale-up, scale to min) is in force, else 0.", "workspace", "budget")
	famParallel = newGauge(Namespace+"_parallel_mini_batches",
		"Mini-batches of a running parallel step by state (pending, running, done, failed).", "workspace", "job", "state")
	famParallelRetries = newGauge(Namespace+"_parallel_mini_batch_retries",
		"Runs of a running parallel step's mini-batches that failed or timed out and were handed out again.", "workspace", "job")
)

// newGauge describes a family read at scrape time.
func newGauge(name, help string, labels ...string) *promtext.Family {
	return promtext.NewFamily(name, help, promtext.Gauge, labels...)
}

// collector reads the gauges from the store at scrape time: the compute
// documents, the node and job counts the store keeps per compute and state
// (a few rows, never every node or job), and the quota limits.
type collector struct {
	db     *store.DB
	limits func(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error)
}

func (c *collector) Families() []*promtext.Family {
	return []*promtext.Family{famNodes, famCores, famTarget, famMax, famMin, famQuotaUsed, famQuotaLimit, famJobs,
		famBudgetSpent, famBudgetAmount, famBudgetActive, famParallel, famParallelRetries}
}

// row is one compute's gauges. Two computes with the same workspace and
// compute name (in different resource groups) share a row.
type row struct {
	workspace, compute string
	cores              int // per node
	nodes              map[string]int
	jobs               map[string]int
	target, min, max   int
}

// pool is one subscription's location.
type pool struct {
	sub, loc string
	usage    quota.Usage
	families map[string]bool // families its computes use
}

// Collect reads the store; a read that fails fails the scrape (a
// partial exposition would read as zeros).
func (c *collector) Collect(ctx context.Context, s *promtext.Scrape) error {
	q := c.db.Q()
	docs, err := store.List[api.Compute](ctx, q, store.KindCompute, "/subscriptions", false, "", 1<<30)
	if err != nil {
		return fmt.Errorf("computes: %w", err)
	}
	nodeCounts, err := store.AllNodeCounts(ctx, q)
	if err != nil {
		return err
	}
	jobCounts, err := store.AllJobCounts(ctx, q)
	if err != nil {
		return err
	}

	rows := map[string]*row{}  // by workspace and compute labels
	byKey := map[string]*row{} // by compute key
	computes := map[string]api.Compute{}
	rowOf := func(workspace, compute string) *row {
		k := workspace + "\x00" + compute
		r := rows[k]
		if r == nil {
			r = &row{workspace: workspace, compute: compute, nodes: map[string]int{}, jobs: map[string]int{}}
			rows[k] = r
		}
		return r
	}
	for _, d := range docs {
		comp := d.Value
		ws, name := labels(comp.ID)
		r := rowOf(ws, name)
		a := comp.Aml()
		if s, ok := catalog.Lookup(a.VMSize); ok {
			r.cores = s.VCPUs
		}
		min, max, _ := comp.Scale()
		r.target += int(a.TargetNodeCount)
		r.min += min
		r.max += max
		byKey[store.Key(comp.ID)] = r
		computes[store.Key(comp.ID)] = comp
	}
	nodesOf := map[string]int{} // by compute key, every state: quota counts them all
	for _, nc := range nodeCounts {
		nodesOf[nc.Compute] += nc.N
	}
	pools := map[string]*pool{}
	for k, comp := range computes {
		sc, _, err := api.ParseComputeID(comp.ID, api.Scope{})
		if err != nil {
			continue
		}
		loc := comp.Properties.ComputeLocation
		pk := strings.ToLower(sc.Subscription + "/" + loc)
		p := pools[pk]
		if p == nil {
			p = &pool{sub: sc.Subscription, loc: loc, usage: quota.Usage{Family: map[string]int64{}}, families: map[string]bool{}}
			pools[pk] = p
		}
		a := comp.Aml()
		if s, ok := catalog.Lookup(a.VMSize); ok && a.VMPriority != api.PriorityLowPriority {
			p.families[s.Family] = true
		}
		p.usage.Add(a.VMSize, a.VMPriority == api.PriorityLowPriority, nodesOf[k])
	}
	for _, nc := range nodeCounts {
		r := byKey[nc.Compute]
		if r == nil { // nodes of a compute being deleted
			r = rowOf(labels(nc.Compute))
			byKey[nc.Compute] = r
		}
		r.nodes[nc.State] += nc.N
	}
	for _, jc := range jobCounts {
		if jc.Compute == "" { // sweeps: their trials count on their compute
			continue
		}
		r := byKey[jc.Compute]
		if r == nil { // jobs of a deleted compute
			r = rowOf(labels(jc.Compute))
			byKey[jc.Compute] = r
		}
		r.jobs[jc.State] += jc.N
	}

	for _, r := range rows {
		for _, st := range NodeStates {
			n := r.nodes[st]
			s.Add(famNodes, float64(n), r.workspace, r.compute, st)
			s.Add(famCores, float64(n*r.cores), r.workspace, r.compute, st)
		}
		s.Add(famTarget, float64(r.target), r.workspace, r.compute)
		s.Add(famMin, float64(r.min), r.workspace, r.compute)
		s.Add(famMax, float64(r.max), r.workspace, r.compute)
		for _, st := range api.JobStatuses {
			s.Add(famJobs, float64(r.jobs[st]), r.workspace, r.compute, st)
		}
	}
	if err := collectBudgets(ctx, q, s); err != nil {
		return err
	}
	if err := collectParallel(ctx, q, s); err != nil {
		return err
	}
	if c.limits == nil {
		return nil
	}
	for _, p := range pools {
		l, err := c.limits(ctx, q, p.sub, p.loc)
		if err != nil {
			return fmt.Errorf("quota of %s in %s: %w", p.sub, p.loc, err)
		}
		quotaRow := func(family, priority string, used, limit int64) {
			s.Add(famQuotaUsed, float64(used), p.sub, p.loc, family, priority)
			s.Add(famQuotaLimit, float64(limit), p.sub, p.loc, family, priority)
		}
		quotaRow(FamilyTotal, PriorityDedicated, p.usage.Dedicated, l.Dedicated)
		quotaRow(FamilyTotal, PriorityLowPriority, p.usage.LowPriority, l.LowPriority)
		// The families the location's clusters use or that have a limit
		// of their own: not every family of the catalog.
		used := make([]string, 0, len(p.families))
		for f := range p.families {
			used = append(used, f)
		}
		names := quota.FamiliesWith(l, p.usage, used...)
		for _, f := range names {
			quotaRow(f, PriorityDedicated, p.usage.Family[f], l.FamilyLimit(f))
		}
	}
	return nil
}

// collectBudgets reports each budget's amount and what its last judgement
// found spent.
func collectBudgets(ctx context.Context, q store.Querier, s *promtext.Scrape) error {
	docs, err := store.List[api.Budget](ctx, q, store.KindBudget, "/subscriptions", false, "", 1<<30)
	if err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	for _, d := range docs {
		b := d.Value
		wsID, _, _ := strings.Cut(b.ID, "/budgets/")
		ws := wsID[strings.LastIndex(wsID, "/")+1:]
		spent, active := 0.0, 0.0
		if st := b.Properties.Status; st != nil {
			spent = st.Spent
			if st.ActionActive {
				active = 1
			}
		}
		s.Add(famBudgetSpent, spent, ws, b.Name)
		s.Add(famBudgetAmount, b.Properties.Amount, ws, b.Name)
		s.Add(famBudgetActive, active, ws, b.Name)
	}
	return nil
}

// collectParallel reports the mini-batches of each parallel step that has
// some still to end.
func collectParallel(ctx context.Context, q store.Querier, s *promtext.Scrape) error {
	uids, err := store.ActiveParallelJobs(ctx, q)
	if err != nil {
		return err
	}
	for _, uid := range uids {
		j, err := store.GetJobByUID(ctx, q, uid)
		if err != nil {
			continue // deleted since
		}
		c, err := store.BatchCounts(ctx, q, uid)
		if err != nil {
			return err
		}
		ws := j.Parent[strings.LastIndex(j.Parent, "/")+1:]
		for st, n := range map[string]int{store.BatchPending: c.Pending, store.BatchRunning: c.Running, store.BatchDone: c.Done, store.BatchFailed: c.Failed} {
			s.Add(famParallel, float64(n), ws, j.Doc.Name, st)
		}
		s.Add(famParallelRetries, float64(c.Retried), ws, j.Doc.Name)
	}
	return nil
}
