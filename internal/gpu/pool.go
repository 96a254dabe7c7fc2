package gpu

import (
	"cmp"
	"slices"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Holder is a node that holds devices.
type Holder struct {
	Node    string
	Compute string // the compute's ARM id
}

// Pool is who holds which devices of a Machine: made from the nodes the
// store records, then changed as the controller's pass gives devices to
// the nodes it creates and frees those of the nodes it removes. It does no
// I/O and is not safe for concurrent use.
type Pool struct {
	m       Machine
	holders map[string]Holder // by device ID
}

// NewPool is a pool of m's devices, none held.
func NewPool(m Machine) *Pool { return &Pool{m: m, holders: map[string]Holder{}} }

// Machine is the machine whose devices the pool divides.
func (p *Pool) Machine() Machine { return p.m }

// Hold records that h holds the devices named ids (an allocation read
// from the store). It returns the ids it could not record: those that
// name no device of the machine (it changed since they were given) and
// those another node holds already.
func (p *Pool) Hold(h Holder, ids []string) (refused []string) {
	for _, id := range ids {
		if !p.known(id) {
			refused = append(refused, id)
			continue
		}
		if was, ok := p.holders[id]; ok && was.Node != h.Node {
			refused = append(refused, id)
			continue
		}
		p.holders[id] = h
	}
	return refused
}

func (p *Pool) known(id string) bool {
	for _, d := range p.m.Devices {
		if ID(d) == id {
			return true
		}
	}
	return false
}

// Release frees every device node holds.
func (p *Pool) Release(node string) {
	for id, h := range p.holders {
		if h.Node == node {
			delete(p.holders, id)
		}
	}
}

// Take gives h n free devices a size of GPU model model may use, the
// first in inventory order, and returns them; none is taken (ok false)
// when fewer than n are free. Taking 0 succeeds with none.
func (p *Pool) Take(h Holder, n int, model string) (got []agentapi.GPU, ok bool) {
	if n <= 0 {
		return nil, true
	}
	for _, d := range p.m.Fitting(model) {
		if _, held := p.holders[ID(d)]; !held {
			got = append(got, d)
			if len(got) == n {
				break
			}
		}
	}
	if len(got) < n {
		return nil, false
	}
	for _, d := range got {
		p.holders[ID(d)] = h
	}
	return got, true
}

// Supply is what a pool offers the nodes of a size: how many of the
// devices they may use are free, how many there are, and who holds the
// others.
type Supply struct {
	Free, Total int
	Held        []Held // by devices held, most first, then by compute
}

// Held is how many devices the nodes of one compute hold.
type Held struct {
	Compute string // the compute's ARM id
	Devices int
}

// Supply is the pool's supply for a size of GPU model model.
func (p *Pool) Supply(model string) Supply {
	fit := p.m.Fitting(model)
	s := Supply{Total: len(fit)}
	by := map[string]int{}
	for _, d := range fit {
		if h, held := p.holders[ID(d)]; held {
			by[h.Compute]++
		} else {
			s.Free++
		}
	}
	for c, n := range by {
		s.Held = append(s.Held, Held{Compute: c, Devices: n})
	}
	slices.SortFunc(s.Held, func(a, b Held) int {
		if c := cmp.Compare(b.Devices, a.Devices); c != 0 {
			return c
		}
		return cmp.Compare(a.Compute, b.Compute)
	})
	return s
}

// HeldBy are the devices node holds, in inventory order.
func (p *Pool) HeldBy(node string) []agentapi.GPU {
	var out []agentapi.GPU
	for _, d := range p.m.Devices {
		if h, ok := p.holders[ID(d)]; ok && h.Node == node {
			out = append(out, d)
		}
	}
	return out
}
