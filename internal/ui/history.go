package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Sample is one reading of a cluster: its nodes by state and the nodes
// its queued jobs ask for, so the studio can chart the cluster growing
// and shrinking.
type Sample struct {
	Time       time.Time `json:"t"`
	Preparing  int       `json:"preparing"`
	Idle       int       `json:"idle"`
	Running    int       `json:"running"`
	Leaving    int       `json:"leaving"`
	Preempted  int       `json:"preempted"`
	Unusable   int       `json:"unusable"`
	Queued     int       `json:"queued"`     // nodes the queued jobs need
	QueuedJobs int       `json:"queuedJobs"` // queued jobs
	Target     int       `json:"target"`     // the controller's target node count
}

// history keeps recent samples per compute (by lower-case ARM id).
type history struct {
	mu      sync.Mutex
	window  time.Duration
	samples map[string][]Sample
}

func newHistory(window time.Duration) *history {
	return &history{window: window, samples: map[string][]Sample{}}
}

// record appends the samples of one pass; computes not in the pass are
// forgotten (they were deleted), and samples older than the window go.
func (h *history) record(now time.Time, pass map[string]Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cutoff := now.Add(-h.window)
	for id := range h.samples {
		if _, ok := pass[id]; !ok {
			delete(h.samples, id)
		}
	}
	for id, s := range pass {
		old := h.samples[id]
		i := 0
		for i < len(old) && old[i].Time.Before(cutoff) {
			i++
		}
		h.samples[id] = append(old[i:], s)
	}
}

// after returns a copy of a compute's samples taken after a time.
func (h *history) after(id string, t time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []Sample{}
	for _, s := range h.samples[strings.ToLower(id)] {
		if s.Time.After(t) {
			out = append(out, s)
		}
	}
	return out
}

// sample reads every compute's node counts and queued demand (read-only)
// and records one sample each.
func (u *UI) sample(ctx context.Context) error {
	loads, err := u.o.Reads.ComputeLoads(ctx)
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	now := u.o.Clock.Now().UTC()
	pass := make(map[string]Sample, len(loads))
	for _, c := range loads {
		n := c.Nodes
		pass[strings.ToLower(c.ID)] = Sample{Time: now, QueuedJobs: c.QueuedJobs, Queued: c.QueuedNodes, Target: c.Target,
			Preparing: n[api.NodePreparing], Idle: n[api.NodeIdle], Running: n[api.NodeRunning],
			Leaving: n[api.NodeLeaving], Preempted: n[api.NodePreempted], Unusable: n[api.NodeUnusable]}
	}
	u.history.record(now, pass)
	return nil
}

// Run samples every cluster until ctx ends.
func (u *UI) Run(ctx context.Context) {
	for {
		if err := u.sample(ctx); err != nil && ctx.Err() == nil {
			u.log.Warn("history sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-u.o.Clock.After(u.o.SampleEvery):
		}
	}
}

// nodeTimes is what the history endpoint tells about each node beside the
// samples: when it was created and became ready, for the nodes table's
// uptime (listNodes does not carry times).
type nodeTimes struct {
	ID        string     `json:"nodeId"`
	Created   time.Time  `json:"created"`
	Ready     *time.Time `json:"ready,omitempty"`
	IdleSince *time.Time `json:"idleSince,omitempty"`
}

// historyView is the answer of GET /ui/api/history.
type historyView struct {
	Now     time.Time   `json:"now"`
	Every   float64     `json:"everySeconds"`
	Window  float64     `json:"windowSeconds"`
	Samples []Sample    `json:"samples"`
	Nodes   []nodeTimes `json:"nodes"`
}

// historyOf is a compute's samples taken after a time, and its nodes.
func (u *UI) historyOf(ctx context.Context, id string, after time.Time) (historyView, error) {
	now := u.o.Clock.Now().UTC()
	v := historyView{Now: now, Every: u.o.SampleEvery.Seconds(), Window: u.o.HistoryWindow.Seconds(),
		Samples: u.history.after(id, after), Nodes: []nodeTimes{}}
	nodes, err := u.o.Reads.NodesOf(ctx, id)
	if err != nil {
		return v, fmt.Errorf("history of %s: %w", id, err)
	}
	for _, n := range nodes {
		t := nodeTimes{ID: n.ID, Created: n.Created}
		if !n.Ready.IsZero() {
			r := n.Ready
			t.Ready = &r
		}
		if !n.IdleSince.IsZero() && n.State == api.NodeIdle {
			i := n.IdleSince
			t.IdleSince = &i
		}
		v.Nodes = append(v.Nodes, t)
	}
	return v, nil
}
