package decide

import (
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Autoscale decides which nodes to create, remove and drain, given the
// cluster after assignments (see the package comment for the rules). Its
// Plan has no Assign; Decide fills that.
func Autoscale(c Cluster, now time.Time) Plan {
	v := newView(c)
	v.order = orderOf(c, now)
	_, hi := limits(c)
	demand, unfit := demandOf(c.Queued, hi)
	return autoscale(c, &v, demand, unfit, 0, now)
}

// autoscale is Autoscale on a prepared view, with the queue's demand and its
// first job that can never run (nil if none) already known; the first
// started jobs that can run, in queue order, have been assigned to nodes
// that v counts as busy, and demand leaves them out. It reorders the groups
// of v.
func autoscale(c Cluster, v *view, demand int, unfit *Job, started int, now time.Time) Plan {
	lo, hi := limits(c)
	timeout := max(c.IdleTimeout, 0)
	var p Plan

	v.sort(v.exiting, byID)
	for _, i := range v.exiting {
		if reapable(&v.nodes[i]) {
			p.Remove = append(p.Remove, v.nodes[i].ID)
		}
	}

	busy := len(v.busy)
	wanted := min(max(busy+demand, lo), hi)
	kept := v.live()

	// idle[:end] are the idle nodes still kept; removal takes from the end,
	// which is the longest idle.
	idle, end := v.idle, len(v.idle)

	// Over maxNodeCount: idle, then preparing, then drain busy nodes.
	if excess := kept - hi; excess > 0 {
		for ; excess > 0 && end > 0; excess-- {
			end--
			p.Remove = append(p.Remove, v.nodes[idle[end]].ID)
		}
		v.sort(v.preparing, newestFirst)
		for k := 0; excess > 0 && k < len(v.preparing); k, excess = k+1, excess-1 {
			p.Remove = append(p.Remove, v.nodes[v.preparing[k]].ID)
		}
		v.sort(v.busy, newestFirst)
		for k := 0; excess > 0 && k < len(v.busy); k, excess = k+1, excess-1 {
			p.Drain = append(p.Drain, v.nodes[v.busy[k]].ID)
		}
		kept = hi
	}

	// Idle scale-down. The queue would use the most recently idle nodes
	// (a waiting gang job reserves them): those are not removed for
	// idleness. With that rule, stopping at wanted is implied; the floor
	// states it.
	// Idle nodes that hold devices other clusters wait for go now, as
	// many as free what they wait for, whatever their idle time.
	floor := max(lo, wanted)
	protected := min(end, demand)
	release := 0
	if g := c.GPUs; g != nil && g.PerNode > 0 && g.Wanted > 0 {
		release = (g.Wanted + g.PerNode - 1) / g.PerNode
	}
	deadline := func(k int) time.Time { return idleDeadline(c.IdlePolicy, &v.nodes[idle[k]], k-protected, timeout) }
	for kept > floor && end > protected && (release > 0 || !now.Before(deadline(end-1))) {
		end--
		kept--
		release--
		p.Remove = append(p.Remove, v.nodes[idle[end]].ID)
	}
	if kept > floor && end > protected {
		// idle[end-1] has not reached its deadline (else the loop would
		// have taken it): it is the next to go.
		p.WakeAt = deadline(end - 1)
	}

	p.Create = max(wanted-kept, 0)
	quotaCut := c.Headroom >= 0 && p.Create > c.Headroom
	if quotaCut {
		p.QuotaShort = p.Create - c.Headroom
		p.Create = c.Headroom
	}
	allowed := p.Create // what quota allows
	if g := c.GPUs; g != nil && g.PerNode > 0 {
		if fit := max(g.Free, 0) / g.PerNode; p.Create > fit {
			p.GPUShort, p.Create = p.Create-fit, fit
		}
	}
	p.Target = kept + p.Create
	if quotaCut {
		p.QuotaWait = quotaWait(c.Queued, v.queue(c), hi, started, kept+allowed-busy, hi-busy)
	}
	if p.GPUShort > 0 {
		p.GPUWait = quotaWait(c.Queued, v.queue(c), hi, started, p.Target-busy, kept+allowed-busy)
	}

	p.Blocked = blocked(c, unfit, busy, demand, quotaCut, c.Headroom)
	if p.GPUShort > 0 {
		g := c.GPUs
		p.Blocked = append(p.Blocked, api.Block{Kind: api.BlockGPUs, GPUs: &api.GPUNeed{Need: g.PerNode, Free: g.Free, Total: g.Total, Held: g.Held}})
	}
	return p
}

// blocked says why demand is not met: a job larger than the cluster can
// be, maxNodeCount, quota; nil when it is met.
func blocked(c Cluster, unfit *Job, busy, demand int, quotaCut bool, headroom int) api.Blocks {
	_, hi := limits(c)
	var why api.Blocks
	if unfit != nil {
		why = append(why, api.Block{Kind: api.BlockTooBig, Job: unfit.ID, JobName: unfit.Name, Need: need(unfit), Max: hi, Schedule: c.MaxSetBy})
	}
	if demand > 0 && busy+demand > hi {
		why = append(why, api.Block{Kind: api.BlockAtMax, Max: hi, Schedule: c.MaxSetBy})
	}
	if quotaCut {
		why = append(why, api.Block{Kind: api.BlockQuota, Allowed: headroom})
	}
	return why
}

// quotaWait finds the jobs that wait for quota (or, called with the
// nodes devices allow as ready and those quota allows as room, for
// devices). It walks the queue in order (order: indices into queue),
// past the started jobs and those that can never run: the ready
// nodes (live, not busy, after the plan, creations included) serve it
// first. A job that ends within room (the nodes maxNodeCount allows beside
// the busy ones) but past the ready nodes waits for quota, for the nodes
// beyond them; the first job that ends past room waits for maxNodeCount,
// and so does everything behind it.
func quotaWait(queue []Job, order []int, hi, started, ready, room int) []Wait {
	var out []Wait
	at := 0 // nodes taken by the jobs ahead
	for _, k := range order {
		j := &queue[k]
		n := need(j)
		if n > hi {
			continue
		}
		if started > 0 {
			started--
			continue
		}
		end := at + n
		if end > room {
			break
		}
		if end > ready {
			out = append(out, Wait{JobID: j.ID, Nodes: end - max(at, ready)})
		}
		at = end
	}
	return out
}

// demandOf sums the nodes the queue needs, leaving out jobs that need more
// than hi nodes; unfit is the first of those in queue order, nil if none.
func demandOf(queue []Job, hi int) (demand int, unfit *Job) {
	for i := range queue {
		j := &queue[i]
		if n := need(j); n <= hi {
			demand += n
		} else if unfit == nil || jobOrder(j, unfit) < 0 {
			unfit = j
		}
	}
	return demand, unfit
}
