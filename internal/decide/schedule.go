package decide

import "time"

// Schedule assigns queued jobs to idle nodes (see the package comment for
// the rules). It returns the assignments in queue order; nil if none.
func Schedule(c Cluster) []Assignment {
	v := newView(c)
	if c.Queue.FairShare {
		// Without a time, each group's usage reads as recorded.
		v.order = orderOf(c, time.Time{})
	}
	as, _ := schedule(c, &v)
	return as
}

// schedule places jobs on v's idle nodes. The nodes it uses are always
// v.idle[:used], in that order, and used is also the sum of the placed
// jobs' needs.
func schedule(c Cluster, v *view) (as []Assignment, used int) {
	_, hi := limits(c)
	free := v.idle
	// Never start work beyond maxNodeCount: when it was lowered, the idle
	// nodes past the cap are the ones the autoscaler removes.
	if room := max(hi-len(v.busy), 0); room < len(free) {
		free = free[:room]
	}
	if len(free) == 0 || len(c.Queued) == 0 {
		return nil, 0
	}
	ids := make([]string, len(free)) // backing for every assignment's NodeIDs
	for _, k := range v.queue(c) {
		j := &c.Queued[k]
		n := need(j)
		if n > hi {
			continue // can never run; reserves nothing
		}
		if n > len(free)-used {
			// The job waits and reserves the idle nodes it would need:
			// all that are left, since it needs more than there are.
			break
		}
		got := ids[used : used+n : used+n]
		for i := range got {
			got[i] = v.nodes[free[used+i]].ID
		}
		used += n
		as = append(as, Assignment{JobID: j.ID, NodeIDs: got})
		if used == len(free) {
			break
		}
	}
	return as, used
}
