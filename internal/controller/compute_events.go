package controller

import (
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// statusEvents are the history entries a change of a compute's recorded
// status makes: a resize starting or ending, and each new reason that
// queued jobs wait or nodes could not be made. was is the status as
// recorded before; state, target, current and errs the new one.
func statusEvents(compute string, was *api.AmlComputeProperties, state string, target, current int, errs []api.ErrorResponse, now time.Time) []store.Event {
	var out []store.Event
	ev := func(typ, msg string) store.Event {
		e := store.Event{Compute: compute, Type: typ, Time: now}
		e.Message = msg
		return e
	}
	old := was.AllocationState
	if old == "" {
		old = api.AllocationSteady
	}
	switch {
	case old != api.AllocationResizing && state == api.AllocationResizing:
		e := ev(api.EventResizeStarted, fmt.Sprintf("resizing from %s to %s", nodes(int(was.TargetNodeCount)), nodes(target)))
		e.Target, e.Current = &target, &current
		out = append(out, e)
	case old == api.AllocationResizing && state == api.AllocationSteady:
		e := ev(api.EventResizeEnded, "steady at "+nodes(current))
		e.Target, e.Current = &target, &current
		if t := was.AllocationStateTransitionTime; t != nil && !t.After(now) {
			e.DurationSeconds = api.Seconds(now.Sub(*t))
			e.Message += fmt.Sprintf(" after %s", api.ShortDuration(now.Sub(*t)))
		}
		out = append(out, e)
	case old == api.AllocationSteady && state == api.AllocationSteady && int(was.TargetNodeCount) != target:
		// Resized within one pass (nodes removed at once): both ends.
		from := int(was.TargetNodeCount)
		s := ev(api.EventResizeStarted, fmt.Sprintf("resizing from %s to %s", nodes(from), nodes(target)))
		s.Target, s.Current = &target, &from
		e := ev(api.EventResizeEnded, "steady at "+nodes(current))
		e.Target, e.Current, e.DurationSeconds = &target, &current, api.Seconds(0)
		out = append(out, s, e)
	}
	for _, x := range errs {
		if x.Error == nil || hasError(was.Errors, x.Error) {
			continue
		}
		switch x.Error.Code {
		case api.CodeScaleUpBlocked, api.CodeQuotaExceeded:
			e := ev(api.EventScaleUpBlocked, x.Error.Message)
			e.Reason = x.Error.Code
			out = append(out, e)
		case "NodeProvisioningFailed":
			out = append(out, ev(api.EventProvisioningFailed, x.Error.Message))
		}
	}
	return out
}

// hasError says whether errs holds an error of the same code and message.
func hasError(errs []api.ErrorResponse, e *api.Error) bool {
	for _, x := range errs {
		if x.Error != nil && x.Error.Code == e.Code && x.Error.Message == e.Message {
			return true
		}
	}
	return false
}

// nodes says "1 node", "3 nodes".
func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
