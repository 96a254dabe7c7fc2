package actuate

import (
	"cmp"
	"slices"
	"time"

	"github.com/cumulus-ml/cumulus/internal/decide"
)

// Demand is one cluster's adaptive idle policy and the history it reads
// (decide.IdleHistory), fed with what the cluster's demand did: jobs that
// arrived, with the idle nodes they found; jobs that ran and ended,
// releasing their nodes; nodes that became ready, with how long they
// took. What it is told may come in any order (the controller learns a
// pass's worth at once, from several places); Policy gives it to the
// history in time order, and at one time releases first (an arrival may
// then take a released node), then ready nodes (an arrival at the time
// a node is ready knows its delay), then arrivals. Not safe for concurrent
// use.
type Demand struct {
	hist    decide.IdleHistory
	pending []demandEvent
}

// demandEvent is one thing Demand was told, until Policy gives it to the
// history.
type demandEvent struct {
	at    time.Time
	kind  uint8 // release, ready or arrival: the order at one time
	nodes int   // arrivals and releases
	idle  int   // arrivals: idle nodes the job found
	took  time.Duration
}

// Kinds of demand events, in the order they apply at one time.
const (
	release uint8 = iota
	ready
	arrival
)

// NewDemand returns an empty history that remembers window demand events
// (distinct times; <= 0: decide's default).
func NewDemand(window int) *Demand {
	d := &Demand{}
	d.hist.Window = window
	return d
}

// Arrive records a job of nodes nodes submitted at t that found idle idle
// nodes it could have started on at once.
func (d *Demand) Arrive(t time.Time, nodes, idle int) {
	d.pending = append(d.pending, demandEvent{at: t, kind: arrival, nodes: nodes, idle: idle})
}

// Release records nodes nodes that became idle at t because the job that
// ran on them ended (not nodes that just finished provisioning).
func (d *Demand) Release(t time.Time, nodes int) {
	d.pending = append(d.pending, demandEvent{at: t, kind: release, nodes: nodes})
}

// Ready records a node that became ready at t, took after it was
// requested; a negative took (clocks that disagree) is left out.
func (d *Demand) Ready(t time.Time, took time.Duration) {
	if took < 0 {
		return
	}
	d.pending = append(d.pending, demandEvent{at: t, kind: ready, took: took})
}

// Policy gives the history what was recorded since the last call and
// returns the adaptive policy over it, holding itself to the fixed
// timeout fallback (which the history's replay of arrivals reads, so it
// is set first).
func (d *Demand) Policy(fallback time.Duration, opt decide.AdaptiveOptions) *decide.AdaptiveIdle {
	p := d.hist.Policy(fallback, opt)
	if len(d.pending) == 0 {
		return p
	}
	slices.SortStableFunc(d.pending, func(a, b demandEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.kind, b.kind)
	})
	for _, e := range d.pending {
		switch e.kind {
		case release:
			d.hist.Release(e.at, e.nodes)
		case ready:
			d.hist.Provisioned(e.took)
		case arrival:
			d.hist.Arrive(e.at, e.nodes, e.idle)
		}
	}
	d.pending = d.pending[:0]
	return p
}
