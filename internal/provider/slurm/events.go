package slurm

import (
	"sort"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// tracker turns successive reads of the queue into node events: each
// change of a node's newest job is told once.
type tracker struct {
	last map[string]seen // node id → what was last told of its newest job
	// ours are the jobs the provider cancelled itself (Delete): their end
	// is not news, and is not told.
	ours map[string]bool
}

type seen struct {
	id     string
	state  string
	reason string // the pending reason told
	gone   bool   // its end was told
}

func newTracker() *tracker { return &tracker{last: map[string]seen{}, ours: map[string]bool{}} }

// cancelled records that the provider cancels job id itself.
func (t *tracker) cancelled(id string) { t.ours[id] = true }

// events are the node events a read of the queue (this control plane's
// jobs, as parseQueue gives them) means, next to what was told before:
//   - a job pending for a reason Slurm gives: Pending, with that reason as
//     a value, each time the reason changes;
//   - a job seen running for the first time: Running (its machine is
//     there);
//   - a running job that Slurm starts ending (COMPLETING): Terminating —
//     its agent has Slurm's grace to stop its job;
//   - a suspended or ended job, or one that left the queue altogether:
//     Gone, with Slurm's state in the reason, once.
//
// A node's older jobs (ended before it was made again), and the end of a
// job the provider cancelled itself, are not news.
func (t *tracker) events(jobs []slurmJob) []provider.Event {
	var out []provider.Event
	cur := newest(jobs)
	for node, j := range cur {
		was, ok := t.last[node]
		if ok && was.id != j.ID && older(j.ID, was.id) {
			// Only an older job of the node is listed: the newer one left.
			if !was.gone && !t.ours[was.id] {
				was.gone = true
				t.last[node] = was
				out = append(out, provider.Event{NodeID: node, Kind: provider.EventGone,
					Reason: "Slurm job " + was.id + " left Slurm's queue"})
			}
			continue
		}
		if !ok || was.id != j.ID {
			was = seen{id: j.ID}
		}
		now := was
		now.state = j.State
		switch phaseOf(j.State) {
		case phaseStarting:
			if j.waits() && j.Reason != was.reason {
				now.reason = j.Reason
				out = append(out, provider.Event{NodeID: node, Kind: provider.EventPending,
					Wait: &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: j.Reason, Queue: j.Partition}})
			}
		case phaseRunning:
			if was.state == "" || phaseOf(was.state) != phaseRunning {
				out = append(out, provider.Event{NodeID: node, Kind: provider.EventRunning})
			}
		case phaseEnding:
			if was.state != "" && !t.ours[j.ID] && (phaseOf(was.state) == phaseRunning || phaseOf(was.state) == phaseStarting) {
				out = append(out, provider.Event{NodeID: node, Kind: provider.EventTerminating,
					Reason: "Slurm is ending job " + j.ID})
			}
		case phaseSuspended, phaseEnded:
			if !was.gone && !t.ours[j.ID] {
				out = append(out, provider.Event{NodeID: node, Kind: provider.EventGone, Reason: endReason(j)})
			}
			now.gone = true
		}
		t.last[node] = now
	}
	for node, was := range t.last {
		if _, ok := cur[node]; ok {
			continue
		}
		if !was.gone && !t.ours[was.id] {
			out = append(out, provider.Event{NodeID: node, Kind: provider.EventGone,
				Reason: "Slurm job " + was.id + " left Slurm's queue"})
		}
		delete(t.last, node)
	}
	listed := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		listed[j.ID] = true
	}
	for id := range t.ours {
		if !listed[id] {
			delete(t.ours, id) // it left the queue: nothing more to hear of it
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].NodeID < out[k].NodeID })
	return out
}
