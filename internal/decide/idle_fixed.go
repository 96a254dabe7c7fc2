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
	idle    []poolRun // oldest first; idle[idleHead:] are still there
	ready   []int64   // when the requested nodes get ready, in order; from readyHead
	waiting int       // node arrivals waiting for a node
	missed  int

	idleHead, readyHead int
}

// poolRun is n nodes idle since at.
type poolRun struct {
	at int64
	n  int
}

func (p *fixedPool) arrive(now int64, nodes int, timeout, provisioning int64) {
	p.advance(now, timeout)
	need := nodes
	for need > 0 && len(p.idle) > p.idleHead {
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
	for len(p.ready)-p.readyHead < p.waiting {
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
	for p.readyHead < len(p.ready) && p.ready[p.readyHead] <= now {
		if p.waiting > 0 {
			p.waiting--
		} else {
			p.push(p.ready[p.readyHead], 1)
		}
		p.readyHead++
	}
	for p.idleHead < len(p.idle) && now-p.idle[p.idleHead].at > timeout {
		p.idleHead++
	}
	// Reuse the memory once the dropped part is the larger.
	if p.readyHead > len(p.ready)/2 {
		p.ready = append(p.ready[:0], p.ready[p.readyHead:]...)
		p.readyHead = 0
	}
	if p.idleHead > len(p.idle)/2 {
		p.idle = append(p.idle[:0], p.idle[p.idleHead:]...)
		p.idleHead = 0
	}
}

func (p *fixedPool) push(at int64, n int) {
	if n <= 0 {
		return
	}
	if k := len(p.idle) - 1; k >= p.idleHead && p.idle[k].at == at {
		p.idle[k].n += n
		return
	}
	p.idle = append(p.idle, poolRun{at, n})
}
