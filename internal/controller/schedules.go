package controller

import (
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// scaleNow is what a compute's schedule makes of its bounds in a pass.
type scaleNow struct {
	min, max int
	own      int                 // the compute's own maxNodeCount
	active   *api.ActiveSchedule // the entry in force; nil when none
	next     time.Time           // the next firing of any entry; zero when none
	zone     *time.Location      // the active entry's, for messages
}

// scaleOf reads the bounds in force at now.
func scaleOf(comp api.Compute, now time.Time) scaleNow {
	s := scaleNow{zone: time.UTC}
	_, s.own, _ = comp.Scale()
	s.min, s.max, s.active, s.next = comp.ScaleAt(now)
	if s.active != nil {
		s.zone = comp.ZoneOf(s.active.Name)
	}
	return s
}

// sameActive says whether two recorded schedule states are the same.
func sameActive(a, b *api.ActiveSchedule) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := a.Name == b.Name && a.Since.Equal(b.Since) && a.Restore == b.Restore &&
		a.MinNodeCount == b.MinNodeCount && a.MaxNodeCount == b.MaxNodeCount && a.NextSchedule == b.NextSchedule
	if (a.NextChange == nil) != (b.NextChange == nil) {
		return false
	}
	return same && (a.NextChange == nil || a.NextChange.Equal(*b.NextChange))
}

// scheduleEvents is the ScheduleApplied event of a change of the bounds
// in force: another entry took over, the one in force now gives other
// bounds, or no entry is in force any more. was is the state recorded
// before.
func scheduleEvents(compute string, was *api.ActiveSchedule, s scaleNow, now time.Time) []store.Event {
	cur := s.active
	switch {
	case cur == nil && was == nil:
		return nil
	case cur != nil && was != nil && cur.Name == was.Name && cur.MinNodeCount == was.MinNodeCount && cur.MaxNodeCount == was.MaxNodeCount:
		return nil
	}
	e := store.Event{Compute: compute, Type: api.EventScheduleApplied, Time: now}
	if was != nil {
		e.From = was.Name
	}
	if cur == nil {
		e.Message = fmt.Sprintf("no schedule in force: the cluster's own scaleSettings apply (minNodeCount %d, maxNodeCount %d)", s.min, s.max)
		return []store.Event{e}
	}
	e.To = cur.Name
	e.Message = fmt.Sprintf("schedule %q applied: minNodeCount %d, maxNodeCount %d", cur.Name, cur.MinNodeCount, cur.MaxNodeCount)
	if cur.Restore {
		e.Message = fmt.Sprintf("schedule %q applied: the cluster's own scaleSettings (minNodeCount %d, maxNodeCount %d)", cur.Name, cur.MinNodeCount, cur.MaxNodeCount)
	}
	if cur.NextChange != nil {
		e.Message += fmt.Sprintf(" until %s (%q)", cur.NextChange.In(s.zone).Format("Mon 2006-01-02 15:04 MST"), cur.NextSchedule)
	}
	return []store.Event{e}
}
