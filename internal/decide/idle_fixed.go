package decide

// fixedPool replays a cluster's demand under a fixed idle timeout, to count
// the node arrivals that would have found no idle node: the reference the
// adaptive policy holds itself to. Times are nanoseconds since the
// history's origin, in order.
//
// The model: a node arrival takes the most recently idle node that has
// been idle at most the timeout; without one it waits, for a node already
// coming that nobody waits for, or a node requested for it, ready after the
// provisioning delay. Nodes released by
// jobs go first to the waiting (oldest first), then idle. A node that gets
// ready takes the oldest waiting, or goes idle. Nodes the timeout removed
// are forgotten.
type fixedPool struct {
	idle    []poolRun // oldest first
	ready   []int64   // when the requested nodes get ready, in order
	waiting int       // node arrivals waiting for a node
	missed  int
}

// poolRun is n nodes idle since at.
type poolRun struct {
	at int64
	n  int
}

func (p *fixedPool) arrive(now int64, nodes int, timeout, provisioning int64) {
	p.advance(now, timeout)
	need := nodes
	for need > 0 && len(p.idle) > 0 {
		top := &p.idle[len(p.idle)-1]
		take := min(top.n, need)
		top.n -= take
		need -= take
		if top.n == 0 {
			p.idle = p.idle[:len(p.idle)-1]
		}
	}
	if need > 0 {
		p.missed++
	}
	p.waiting += need
	// Nodes already coming for work that a release served take the
	// newcomers first; a node is requested for each of the rest.
	for len(p.ready) < p.waiting {
		p.ready = append(p.ready, now+provisioning)
	}
}

func (p *fixedPool) release(now int64, nodes int, timeout int64) {
	p.advance(now, timeout)
	served := min(nodes, p.waiting)
	p.waiting -= served
	p.push(now, nodes-served)
}

// advance applies what happened before now: nodes getting ready, idle
// nodes removed by the timeout.
func (p *fixedPool) advance(now, timeout int64) {
	k := 0
	for k < len(p.ready) && p.ready[k] <= now {
		if p.waiting > 0 {
			p.waiting--
		} else {
			p.push(p.ready[k], 1)
		}
		k++
	}
	p.ready = append(p.ready[:0], p.ready[k:]...)
	i := 0
	for i < len(p.idle) && now-p.idle[i].at > timeout {
		i++
	}
	if i > 0 {
		p.idle = append(p.idle[:0], p.idle[i:]...)
	}
}

func (p *fixedPool) push(at int64, n int) {
	if n <= 0 {
		return
	}
	if k := len(p.idle) - 1; k >= 0 && p.idle[k].at == at {
		p.idle[k].n += n
		return
	}
	p.idle = append(p.idle, poolRun{at, n})
}
