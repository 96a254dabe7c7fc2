package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/cron"
)

// ScaleSchedule (Cumulus extension, ignored by Azure clients) is one entry
// of a compute's scaling schedule: at each firing of Cron, read in
// TimeZone, its bounds take effect. At any instant the entry that fired
// last is in force (see Compute.ScaleAt); Restore brings back the
// compute's own scaleSettings.
type ScaleSchedule struct {
	Name string `json:"name"`
	// Cron is five fields: minute hour day-of-month month day-of-week.
	Cron string `json:"cron"`
	// TimeZone is an IANA name; default UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// MinNodeCount and MaxNodeCount replace the compute's own; one left
	// out is the compute's own.
	MinNodeCount *int32 `json:"minNodeCount,omitempty"`
	MaxNodeCount *int32 `json:"maxNodeCount,omitempty"`
	// Restore: from this firing on, the compute's own scaleSettings apply.
	Restore bool `json:"restore,omitempty"`
}

// ActiveSchedule (read-only, written by the cluster controller) is the
// schedule entry in force and the bounds it gives.
type ActiveSchedule struct {
	Name         string    `json:"name"`
	Since        time.Time `json:"since"` // when it fired
	Restore      bool      `json:"restore,omitempty"`
	MinNodeCount int32     `json:"minNodeCount"`
	MaxNodeCount int32     `json:"maxNodeCount"`
	// NextChange is the next firing of any entry, and NextSchedule that
	// entry's name.
	NextChange   *time.Time `json:"nextChange,omitempty"`
	NextSchedule string     `json:"nextSchedule,omitempty"`
}

// MaxSchedules is how many entries a compute's schedule may have.
const MaxSchedules = 20

// ScaleAt returns the bounds in force at now on a prepared compute: those
// of the schedule entry that fired last (within cron.Horizon), or the
// compute's own when none did. Of entries that fired at the same instant
// the later in the list wins. A bound an entry leaves out is the
// compute's own, and when the result has min above max, max wins. active
// describes the entry in force (nil when none), next is the next firing of
// any entry (zero when none).
func (c *Compute) ScaleAt(now time.Time) (min, max int, active *ActiveSchedule, next time.Time) {
	min, max, _ = c.Scale()
	var (
		last     time.Time
		lastAt   = -1
		nextName string
	)
	scheds := c.Aml().Schedules
	for i, s := range scheds {
		e, loc, err := s.parse()
		if err != nil {
			continue // refused when the compute was written
		}
		if p, ok := e.Prev(now, loc); ok && !p.Before(last) {
			last, lastAt = p, i
		}
		if n, ok := e.Next(now, loc); ok && (next.IsZero() || n.Before(next)) {
			next, nextName = n, s.Name
		}
	}
	if lastAt < 0 {
		return min, max, nil, next
	}
	s := scheds[lastAt]
	if !s.Restore {
		if s.MinNodeCount != nil {
			min = int(*s.MinNodeCount)
		}
		if s.MaxNodeCount != nil {
			max = int(*s.MaxNodeCount)
		}
		min = minInt(min, max)
	}
	active = &ActiveSchedule{Name: s.Name, Since: last.UTC(), Restore: s.Restore, MinNodeCount: int32(min), MaxNodeCount: int32(max), NextSchedule: nextName}
	if !next.IsZero() {
		n := next.UTC()
		active.NextChange = &n
	}
	return min, max, active, next
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// LargestMax is the most nodes a prepared compute may ever have: its own
// maxNodeCount or a schedule entry's, whichever is larger.
func (c *Compute) LargestMax() int {
	_, max, _ := c.Scale()
	for _, s := range c.Aml().Schedules {
		if s.MaxNodeCount != nil && int(*s.MaxNodeCount) > max {
			max = int(*s.MaxNodeCount)
		}
	}
	return max
}

// parse reads an entry's expression and zone.
func (s ScaleSchedule) parse() (*cron.Expr, *time.Location, error) {
	e, err := cron.Parse(s.Cron)
	if err != nil {
		return nil, nil, err
	}
	zone := s.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	loc, err := cron.LoadLocation(zone)
	if err != nil {
		return nil, nil, err
	}
	return e, loc, nil
}

// Describe says what an entry in force does, for messages: `schedule
// "nights" (maxNodeCount 0 since 20:00 CET)`.
func (a *ActiveSchedule) Describe(zone *time.Location) string {
	if zone == nil {
		zone = time.UTC
	}
	what := fmt.Sprintf("minNodeCount %d, maxNodeCount %d", a.MinNodeCount, a.MaxNodeCount)
	if a.Restore {
		what = "the cluster's own scaleSettings"
	}
	s := fmt.Sprintf("schedule %q (%s since %s", a.Name, what, a.Since.In(zone).Format("Mon 2006-01-02 15:04 MST"))
	if a.NextChange != nil {
		s += fmt.Sprintf("; next change %s by %q", a.NextChange.In(zone).Format("Mon 2006-01-02 15:04 MST"), a.NextSchedule)
	}
	return s + ")"
}

// ZoneOf is the time zone of the named entry of a prepared compute (UTC
// when there is none).
func (c *Compute) ZoneOf(schedule string) *time.Location {
	for _, s := range c.Aml().Schedules {
		if s.Name == schedule {
			if _, loc, err := s.parse(); err == nil {
				return loc
			}
		}
	}
	return time.UTC
}

// prepareSchedules checks a compute's schedule against its own scale
// settings (already prepared) and spells each time zone.
func prepareSchedules(v *Validation, a *AmlComputeProperties) {
	const target = "properties.properties.schedules"
	if len(a.Schedules) > MaxSchedules {
		v.Add(CodeValidationError, target, "a compute may have at most %d schedules, got %d", MaxSchedules, len(a.Schedules))
		return
	}
	ownMax := int32(-1)
	if ss := a.ScaleSettings; ss != nil && ss.MaxNodeCount != nil {
		ownMax = *ss.MaxNodeCount
	}
	seen := map[string]int{}
	for i := range a.Schedules {
		s := &a.Schedules[i]
		t := fmt.Sprintf("%s[%d]", target, i)
		switch err := checkScheduleName(s.Name); {
		case err != nil:
			v.Add(CodeValidationError, t+".name", "%s", err)
		default:
			if j, dup := seen[strings.ToLower(s.Name)]; dup {
				v.Add(CodeValidationError, t+".name", "schedule name %q is used twice (entries %d and %d)", s.Name, j, i)
			}
			seen[strings.ToLower(s.Name)] = i
		}
		if e, err := cron.Parse(s.Cron); err != nil {
			v.Add(CodeValidationError, t+".cron", "cron: %s", err)
		} else if _, ok := e.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); !ok {
			v.Add(CodeValidationError, t+".cron", "cron %q never fires", s.Cron)
		}
		if s.TimeZone == "" {
			s.TimeZone = "UTC"
		}
		if _, err := cron.LoadLocation(s.TimeZone); err != nil {
			v.Add(CodeValidationError, t+".timeZone", "%s", err)
		}
		lo, hi := s.MinNodeCount, s.MaxNodeCount
		switch {
		case s.Restore && (lo != nil || hi != nil):
			v.Add(CodeValidationError, t+".restore", "restore brings back the cluster's own scaleSettings; give it without minNodeCount and maxNodeCount")
		case !s.Restore && lo == nil && hi == nil:
			v.Add(CodeValidationError, t, "schedule %q sets nothing: give minNodeCount and/or maxNodeCount, or restore: true", s.Name)
		}
		if lo != nil && *lo < 0 {
			v.Add(CodeValidationError, t+".minNodeCount", "minNodeCount may not be negative, got %d", *lo)
		}
		if hi != nil && *hi < 0 {
			v.Add(CodeValidationError, t+".maxNodeCount", "maxNodeCount may not be negative, got %d (0 stops the cluster)", *hi)
		}
		if hi != nil && *hi > MaxClusterNodes {
			v.Add(CodeValidationError, t+".maxNodeCount", "maxNodeCount must be at most %d, got %d", MaxClusterNodes, *hi)
		}
		switch {
		case lo != nil && hi != nil && *lo > *hi:
			v.Add(CodeValidationError, t+".minNodeCount", "minNodeCount (%d) may not exceed maxNodeCount (%d)", *lo, *hi)
		case lo != nil && hi == nil && ownMax >= 0 && *lo > ownMax:
			v.Add(CodeValidationError, t+".minNodeCount", "minNodeCount (%d) exceeds the cluster's maxNodeCount (%d); give the schedule a maxNodeCount too", *lo, ownMax)
		}
	}
}

// checkScheduleName: 1 to 64 letters, digits, '-' and '_'.
func checkScheduleName(n string) error {
	if n == "" {
		return fmt.Errorf("a schedule needs a name")
	}
	if len(n) > 64 {
		return fmt.Errorf("schedule name %.64q… is longer than 64 characters", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("schedule name %q may contain only letters, digits, '-' and '_'", n)
		}
	}
	return nil
}
