package api

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Event types: what happened to a compute, a node or a job. A compute's
// history holds its own and its nodes' events, a job's its status changes
// (type "Job" + the status: JobQueued, JobRunning, JobFailed, …).
const (
	EventResizeStarted      = "ResizeStarted"      // the cluster's target changed: nodes are added or removed
	EventResizeEnded        = "ResizeEnded"        // every node the target asks for is there and no other
	EventScaleUpBlocked     = "ScaleUpBlocked"     // queued jobs wait and the cluster may not grow (maxNodeCount, quota)
	EventProvisioningFailed = "ProvisioningFailed" // the provider could not create a node
	EventNodeRequested      = "NodeRequested"      // a node was asked of the provider
	EventNodeReady          = "NodeReady"          // its agent registered: allocation and boot time
	EventNodeIdle           = "NodeIdle"           // it finished its work
	EventNodeLeaving        = "NodeLeaving"        // it is being removed
	EventNodeRemoved        = "NodeRemoved"        // its machine and record are gone
	EventNodePreempted      = "NodePreempted"      // its low-priority machine was taken back
	EventNodeUnusable       = "NodeUnusable"       // it failed (reason says how)
	EventBudgetThreshold    = "BudgetThreshold"    // a budget covering the compute reached a threshold
	EventScheduleApplied    = "ScheduleApplied"    // a schedule entry changed the cluster's bounds in force
	EventJobPreempted       = "JobPreempted"       // the queue policy stopped a running job for a waiting one (reason: its kind)
	EventJobPrefix          = "Job"
)

// EventTypes lists the compute and node event types, for validation and
// help.
var EventTypes = []string{EventResizeStarted, EventResizeEnded, EventScaleUpBlocked, EventProvisioningFailed,
	EventNodeRequested, EventNodeReady, EventNodeIdle, EventNodeLeaving, EventNodeRemoved, EventNodePreempted, EventNodeUnusable,
	EventBudgetThreshold, EventScheduleApplied, EventJobPreempted}

// A parallel step's events besides its status changes.
const (
	EventMiniBatchesPlanned = "MiniBatchesPlanned" // its nodes split input_data into mini-batches
	EventMiniBatchFailed    = "MiniBatchFailed"    // a mini-batch failed for good (its retries spent)
)

// JobEventTypes lists the job event types, one per status, and a
// parallel step's.
func JobEventTypes() []string {
	var out []string
	for _, s := range JobStatuses {
		out = append(out, EventJobPrefix+s)
	}
	return append(out, EventMiniBatchesPlanned, EventMiniBatchFailed)
}

// EventDetail is what an event says beyond who, what and when.
type EventDetail struct {
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
	From    string `json:"from,omitempty"` // the state or status before
	To      string `json:"to,omitempty"`   // the state or status after
	// Nodes of a job's attempt, by rank, and the attempt (job events).
	Nodes   []string `json:"nodes,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	// A node's readiness: from its request to the provider's machine,
	// and from the machine to its agent's registration.
	AllocationSeconds *float64 `json:"allocationSeconds,omitempty"`
	BootSeconds       *float64 `json:"bootSeconds,omitempty"`
	// How long something lasted: a resize, a node's life.
	DurationSeconds *float64 `json:"durationSeconds,omitempty"`
	Target          *int     `json:"targetNodeCount,omitempty"`
	Current         *int     `json:"currentNodeCount,omitempty"`
}

// Event is one entry of a compute's or a job's history, as the events API
// returns it (a Cumulus extension).
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Compute string    `json:"compute,omitempty"` // the compute's name
	Node    string    `json:"node,omitempty"`
	Job     string    `json:"job,omitempty"` // the job's name
	EventDetail
}

// EventsPage is one page of events, newest first; nextLink has the older
// ones.
type EventsPage struct {
	Value    []Event `json:"value"`
	NextLink string  `json:"nextLink,omitempty"`
}

// Seconds is a duration as the events' seconds fields hold it.
func Seconds(d time.Duration) *float64 {
	s := d.Round(time.Millisecond).Seconds()
	return &s
}

// JobEvents is a job's history as events, oldest first: one per entry of
// its statusHistory, with the attempt and nodes of the entries that
// belong to a run. compute names the job's compute.
func JobEvents(j Job, compute string) []Event {
	p := j.Properties
	out := make([]Event, 0, len(p.History))
	attempt, prev := 0, ""
	for _, h := range p.History {
		e := Event{Time: h.Time, Type: EventJobPrefix + h.Status, Compute: compute, Job: j.Name}
		e.From, e.To, e.Reason = prev, h.Status, h.Reason
		e.Message = "status " + h.Status
		if h.Reason != "" {
			e.Message += ": " + h.Reason
		}
		if h.Status == JobPreparing && !runs(prev) {
			attempt++
		}
		if attempt > 0 && (runs(h.Status) || (JobTerminal(h.Status) && runs(prev))) {
			e.Attempt = attempt
			if attempt <= len(p.Attempts) {
				e.Nodes = p.Attempts[attempt-1].Nodes
			}
		}
		out = append(out, e)
		prev = h.Status
	}
	if p.ParallelSpec != nil && p.Parallel != nil { // with its failures read (a view's)
		out = append(out, parallelEvents(j, compute)...)
		sort.SliceStable(out, func(a, b int) bool { return out[a].Time.Before(out[b].Time) })
	}
	return out
}

// parallelEvents are a parallel step's own events: its plan and each
// mini-batch that failed for good.
func parallelEvents(j Job, compute string) []Event {
	st := j.Properties.Parallel
	var out []Event
	if st.Planned != nil {
		out = append(out, Event{Time: *st.Planned, Type: EventMiniBatchesPlanned, Compute: compute, Job: j.Name,
			EventDetail: EventDetail{Message: fmt.Sprintf("input_data split into %d mini-batches of %d items", st.MiniBatches, st.Items)}})
	}
	for _, f := range st.Failures {
		if f.Ended == nil {
			continue
		}
		out = append(out, Event{Time: *f.Ended, Type: EventMiniBatchFailed, Compute: compute, Job: j.Name,
			EventDetail: EventDetail{Message: fmt.Sprintf("mini-batch %d failed after %d tries: %s", f.Index, f.Tries, f.Error),
				Reason: strings.Join(f.Items, ", ")}})
	}
	return out
}

// runs says whether a job in this status has an attempt on its nodes.
func runs(status string) bool {
	switch status {
	case JobPreparing, JobStarting, JobRunning, JobFinalizing:
		return true
	}
	return false
}

// ShortDuration writes a duration for an event's message: to a tenth of
// a second below ten seconds (a local node is ready in 0.4s), to the
// second above.
func ShortDuration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
