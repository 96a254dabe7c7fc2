package sim

import (
	"context"
	"fmt"

	"github.com/cumulus-ml/cumulus/internal/actuate"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/decide"
)

// actuator carries out one cluster's plans in memory, through
// actuate.Apply as the cluster controller does: assignments start jobs,
// drains mark nodes leaving, removes take nodes out (billed until the
// deletion delay has passed), creates add preparing nodes that become
// idle after the provisioning delay, preemptions stop running jobs and
// queue them again. A plan that does not fit the cluster (an assignment
// out of queue order, a removal of a busy node) is an error: the decision
// and the simulator disagree.
type actuator struct {
	s          *sim
	c          *cluster
	scaledDown bool // this plan removed an idle or preparing node
}

var _ actuate.Actuator = (*actuator)(nil)

// Assign starts the jobs at the heads of their queues: trace jobs have
// one priority, so the plan takes each queue in its order (under FIFO
// one queue, under fair share a queue per team).
func (a *actuator) Assign(_ context.Context, as []decide.Assignment) error {
	for _, x := range as {
		j := a.s.job(x.JobID)
		if j == nil || j.cl != a.c {
			return fmt.Errorf("plan assigns unknown job %s", x.JobID)
		}
		if err := a.c.dequeue(j); err != nil {
			return err
		}
		if err := a.s.start(j, x.NodeIDs); err != nil {
			return err
		}
	}
	return nil
}

// Preempt stops the running jobs the plan names for others.
func (a *actuator) Preempt(_ context.Context, ps []api.Preemption) error {
	for _, p := range ps {
		j := a.s.job(p.Job)
		if j == nil || j.cl != a.c {
			return fmt.Errorf("plan preempts unknown job %s", p.Job)
		}
		if err := a.s.reclaim(j); err != nil {
			return err
		}
	}
	return nil
}

func (a *actuator) Drain(_ context.Context, id string) error {
	if n := a.c.byID[id]; n != nil && n.state != decide.NodeLeaving {
		a.s.count(n)
		n.state = decide.NodeLeaving
	}
	return nil
}

func (a *actuator) Remove(_ context.Context, id string) (bool, error) {
	n := a.c.byID[id]
	if n == nil {
		return false, fmt.Errorf("plan removes unknown node %s", id)
	}
	if n.job != nil {
		return false, fmt.Errorf("plan removes node %s, which runs job %s", id, n.job.id)
	}
	if n.state == decide.NodeIdle || n.state == decide.NodePreparing {
		a.scaledDown = true
	}
	a.s.remove(n)
	return true, nil
}

func (a *actuator) Create(_ context.Context, count int, _ []string) (int, error) {
	for range count {
		a.s.create(a.c)
	}
	return count, nil
}

// Record counts the plan's scale-up and scale-down, and schedules the
// cluster's next decision at the plan's WakeAt.
func (a *actuator) Record(_ context.Context, p decide.Plan, done actuate.Applied) error {
	c := a.c
	if a.scaledDown {
		c.m.ScaleDowns++
		a.scaledDown = false
	}
	if done.Created > 0 {
		c.m.ScaleUps++
	}
	return a.s.wake(c, p.WakeAt)
}

// start runs j's next attempt on the nodes named.
func (s *sim) start(j *job, ids []string) error {
	c := j.cl
	j.state, j.started = jobRunning, s.now
	j.running = len(c.running)
	c.running = append(c.running, j)
	s.hold(j, j.nodes)
	j.attempt++
	j.waited += s.now - j.enqueued
	j.on = j.on[:0]
	for _, id := range ids {
		n := c.byID[id]
		if n == nil || n.job != nil || n.state != decide.NodeIdle {
			return fmt.Errorf("job %s assigned to node %s, which is not idle", j.id, id)
		}
		s.count(n)
		n.state, n.job = decide.NodeRunning, j
		if n.created >= j.enqueued {
			j.cold = true
		}
		j.on = append(j.on, n)
	}
	s.push(event{at: s.now + j.duration, kind: evEnd, gen: j.attempt, job: j})
	return nil
}

// remove takes n out of its cluster.
func (s *sim) remove(n *node) {
	c := n.cl
	s.count(n)
	last := len(c.nodes) - 1
	c.nodes[n.pos] = c.nodes[last]
	c.nodes[n.pos].pos = n.pos
	c.nodes = c.nodes[:last]
	n.pos = -1
	delete(c.byID, n.id)
	s.nodesNow--
	if n.evicted {
		// Gone with the eviction: no longer billed, its cores are free.
		s.quotaAdd(-1)
		s.freeQuota()
		return
	}
	c.m.NodesRemoved++
	d := s.prov.DeletionDelay(n.ref())
	c.use.deleting += d.Seconds()
	// Its cores are free once the deletion is done.
	s.push(event{at: s.now + d, kind: evDeleted, cl: c})
}

// create adds a preparing node to c.
func (s *sim) create(c *cluster) {
	c.nextNode++
	if c.nextNode == 1 || c.lastReq != s.now {
		c.lastReq, c.reqNth = s.now, 0
	}
	n := &node{
		id: fmt.Sprintf("%s-%06d", c.name, c.nextNode), k: c.nextNode, nth: c.reqNth, cl: c, pos: len(c.nodes), state: decide.NodePreparing,
		created: s.now, since: s.now,
	}
	c.reqNth++
	c.nodes = append(c.nodes, n)
	c.byID[n.id] = n
	c.m.NodesCreated++
	c.m.PeakNodes = max(c.m.PeakNodes, len(c.nodes))
	s.nodesNow++
	s.peak = max(s.peak, s.nodesNow)
	s.quotaAdd(1)
	s.push(event{at: s.now + s.prov.ProvisionDelay(n.ref()), kind: evReady, node: n})
}
