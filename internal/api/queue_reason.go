package api

import "strings"

// NodesWaitPrefix begins the reason of a queued job that waits for its
// cluster's nodes: the cluster is at maxNodeCount, growing, or failing to
// provision.
const NodesWaitPrefix = "waiting for nodes: "

// WordsWait reports whether a job's status message is its QueueReason when
// it is read: a queued job with a reason of its own, or none recorded (a
// message about something else, such as why it was requeued, is kept).
func (p *JobProperties) WordsWait() bool {
	return p.Status == JobQueued && (p.StatusMessage == "" || p.Waiting != nil)
}

// QueueReason says why queued job j (store uid) waits: its own reason
// (Waiting: quota, the machine's GPUs), else its compute's as the cluster controller last
// recorded them (Blocked: at maxNodeCount, a job too big for it — this one
// only —, the provider backing off, a budget, where its fair-share group
// stands), else what the compute's state
// says (nodes preparing, the cluster growing: its target above its current
// count, as GET of the compute says them). "" when nothing says.
func QueueReason(c Compute, j *Job, uid string) string {
	if w := j.Properties.Waiting; w != nil {
		return w.ForJob(&c)
	}
	a := c.Aml()
	var why []string
	prefix := NodesWaitPrefix
	for _, b := range a.Blocked {
		if b.Kind == BlockQuota || b.Kind == BlockGPUs || (b.Job != "" && b.Job != uid) {
			continue // those that wait for quota or GPUs say so themselves; another job's
		}
		if g := j.Properties.FairShareGroup; b.Kind == BlockShare && (g == nil || *g != b.Group) {
			continue // another group's
		}
		if b.Job == uid && j.Name != "" {
			b.JobName = j.Name // as its owner spelled it
		}
		if b.Kind == BlockBudget {
			prefix = b.jobPrefix() // a budget holds every job
		}
		why = append(why, b.forJob(&c))
	}
	for _, e := range a.Errors {
		if e.Error != nil && e.Error.Code == CodeNodeNotReady {
			why = append(why, "a node is being prepared ("+e.Error.Message+")")
		}
	}
	if len(why) == 0 && a.AllocationState == AllocationResizing && a.TargetNodeCount > a.CurrentNodeCount {
		why = append(why, "the cluster is growing; nodes are being provisioned")
	}
	if len(why) == 0 {
		return ""
	}
	return prefix + strings.Join(why, "; ")
}
