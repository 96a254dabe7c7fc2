package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// nodeEvent is the event a node's change from state was to n records, if
// any. Its time is the node's own record of the change: its creation, its
// registration, when it became idle, or Changed.
func nodeEvent(was string, n Node) (Event, bool) {
	e := Event{Compute: n.Compute, Node: n.ID}
	e.From, e.To, e.Reason = was, n.State, n.Reason
	switch {
	case was == "":
		e.Type, e.Time, e.From, e.Reason = api.EventNodeRequested, n.Created, "", ""
		e.Message = fmt.Sprintf("a %s %s node was requested from the %s provider", n.Priority, n.VMSize, n.Provider)
		if n.Provider == "" {
			e.Message = fmt.Sprintf("a %s %s node was requested", n.Priority, n.VMSize)
		}
		if len(n.GPUDevices) > 0 {
			e.Message += fmt.Sprintf(", holding GPU %s", strings.Join(n.GPUDevices, ", "))
		}
	case was == n.State:
		return Event{}, false
	case n.State == api.NodeIdle && was == api.NodePreparing:
		e.Type, e.Time = api.EventNodeReady, n.Ready
		total := n.Ready.Sub(n.Created)
		e.DurationSeconds = api.Seconds(total)
		e.Message = fmt.Sprintf("ready %s after it was requested", api.ShortDuration(total))
		if !n.Allocated.IsZero() && !n.Allocated.After(n.Ready) {
			alloc, boot := n.Allocated.Sub(n.Created), n.Ready.Sub(n.Allocated)
			e.AllocationSeconds, e.BootSeconds = api.Seconds(alloc), api.Seconds(boot)
			e.Message += fmt.Sprintf(" (allocation %s, boot %s)", api.ShortDuration(alloc), api.ShortDuration(boot))
		}
	case n.State == api.NodeIdle:
		e.Type, e.Time, e.Message = api.EventNodeIdle, n.IdleSince, "idle"
	case n.State == api.NodeLeaving:
		e.Type, e.Time, e.Message = api.EventNodeLeaving, n.Changed, "leaving"
	case n.State == api.NodePreempted:
		e.Type, e.Time, e.Message = api.EventNodePreempted, n.Changed, "preempted"
	case n.State == api.NodeUnusable:
		e.Type, e.Time, e.Message = api.EventNodeUnusable, n.Changed, "unusable"
	default:
		return Event{}, false // preparing again, running: the job's history tells
	}
	if e.Reason != "" && e.Type != api.EventNodeRequested && e.Type != api.EventNodeReady {
		e.Message += ": " + e.Reason
	}
	return e, true
}

// removedEvent records a node's record going, with how long it lived.
func removedEvent(n Node, at time.Time) Event {
	e := Event{Compute: n.Compute, Node: n.ID, Type: api.EventNodeRemoved, Time: at}
	e.From = n.State
	life := at.Sub(n.Created)
	e.DurationSeconds = api.Seconds(life)
	e.Message = fmt.Sprintf("removed after %s", api.ShortDuration(life))
	return e
}
