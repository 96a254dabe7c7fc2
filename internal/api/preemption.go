package api

import "fmt"

// Preemption is why a queue policy stops a running job and queues it again
// for a waiting one: a value made by the decisions (decide), recorded as
// the stopped attempt's reason, an event and a metric, and worded only
// here.
type Preemption struct {
	// Kind is the policy's mode: PreemptLowerPriority or PreemptOverShare.
	Kind string `json:"kind"`
	// The job stopped: its uid, name and priority; with OverShare its
	// group, the nodes the group held and its share.
	Job      string  `json:"job"`
	JobName  string  `json:"jobName,omitempty"`
	Priority int     `json:"priority,omitempty"`
	Group    string  `json:"group,omitempty"`
	Nodes    int     `json:"nodes,omitempty"`
	Share    float64 `json:"share,omitempty"`
	// The job it makes room for, likewise.
	For         string  `json:"for"`
	ForName     string  `json:"forName,omitempty"`
	ForPriority int     `json:"forPriority,omitempty"`
	ForGroup    string  `json:"forGroup,omitempty"`
	ForNodes    int     `json:"forNodes,omitempty"`
	ForShare    float64 `json:"forShare,omitempty"`
}

// Words says why the job was preempted, for its attempt's reason and the
// compute's events. c, when not nil, is the compute (it names the groups).
func (p Preemption) Words(c *Compute) string {
	forName := p.ForName
	if forName == "" {
		forName = p.For
	}
	if p.Kind == PreemptLowerPriority {
		return fmt.Sprintf("preempted for job %s of priority %d (this job's priority is %d)", forName, p.ForPriority, p.Priority)
	}
	name := func(g string) string {
		if c != nil {
			return c.Queue().GroupName(g)
		}
		return g
	}
	return fmt.Sprintf("preempted for fair share: %s is over its share (%d of %s nodes) and job %s of %s, within its share (%d of %s nodes), waits",
		name(p.Group), p.Nodes, Nodes(p.Share), forName, name(p.ForGroup), p.ForNodes, Nodes(p.ForShare))
}
