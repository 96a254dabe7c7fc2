// Package cron parses five-field cron expressions and finds when they fire
// in a time zone. It is pure: no clock reads, no goroutines; time zones
// come from the Go runtime's database (the binary embeds one).
//
// # Expressions
//
// Five fields separated by spaces: minute (0-59), hour (0-23), day of the
// month (1-31), month (1-12 or jan-dec) and day of the week (0-7 or
// sun-sat; 0 and 7 are Sunday). A field is a comma-separated list of
// elements; an element is *, a value, a range a-b, or either of the first
// and last followed by a step: */15, 8-18/2, 5/10 (5 to the field's
// maximum, every 10). Names match in any case. The macros @yearly
// (@annually), @monthly, @weekly, @daily (@midnight) and @hourly stand for
// their usual expressions.
//
// As in Vixie cron, when both the day of the month and the day of the week
// are restricted (neither starts with *), a day matches when either does;
// otherwise both must.
//
// # Wall clock and daylight-saving time
//
// An expression names wall-clock times in a location. A wall time that
// happens twice (clocks go back) fires once, at its first occurrence: in
// Europe/Berlin on the last Sunday of October, 02:30 fires at 02:30 CEST
// and not again an hour later. A wall time that does not exist (clocks go
// forward) fires at the first instant after the gap: 02:30 on the last
// Sunday of March fires at 03:00 CEST; several firings inside one gap are
// one firing. A daily schedule therefore fires exactly once every day.
package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Horizon is how far Prev and Next look: five years, so that an
// expression firing only on 29 February is found.
const Horizon = 5 * 366 * 24 * time.Hour

const horizonDays = 5*366 + 2

// Expr is a parsed cron expression.
type Expr struct {
	text                       string
	minute, hour, dom, month   uint64 // bit i set: value i matches
	dow                        uint64 // 0-6, Sunday 0
	domRestricted, dowRestrict bool
}

// String is the expression as it was parsed.
func (e *Expr) String() string { return e.text }

var macros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

type field struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var fields = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// Parse reads a five-field expression or a macro.
func Parse(s string) (*Expr, error) {
	text := strings.TrimSpace(s)
	spec := text
	if strings.HasPrefix(spec, "@") {
		m, ok := macros[strings.ToLower(spec)]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q (use @yearly, @monthly, @weekly, @daily or @hourly)", spec)
		}
		spec = m
	}
	parts := strings.Fields(spec)
	if len(parts) != 5 {
		return nil, fmt.Errorf("%q has %d fields; want 5: minute hour day-of-month month day-of-week", text, len(parts))
	}
	e := &Expr{text: text}
	var sets [5]uint64
	for i, p := range parts {
		set, err := parseField(p, fields[i])
		if err != nil {
			return nil, fmt.Errorf("%s field %q: %w", fields[i].name, p, err)
		}
		sets[i] = set
	}
	e.minute, e.hour, e.dom, e.month = sets[0], sets[1], sets[2], sets[3]
	e.dow = sets[4]
	if e.dow&(1<<7) != 0 { // 7 is Sunday too
		e.dow = e.dow&^(1<<7) | 1
	}
	e.domRestricted = !strings.HasPrefix(parts[2], "*")
	e.dowRestrict = !strings.HasPrefix(parts[4], "*")
	return e, nil
}

func parseField(s string, f field) (uint64, error) {
	var set uint64
	for _, el := range strings.Split(s, ",") {
		if el == "" {
			return 0, fmt.Errorf("empty list element")
		}
		rng, stepText, hasStep := strings.Cut(el, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		lo, hi := f.min, f.max
		if f.name == "day-of-week" {
			hi = 6 // * is Sunday to Saturday; 7 only when named
		}
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			if hi, err = value(b, f); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %s runs backwards", rng)
			}
		default:
			v, err := value(rng, f)
			if err != nil {
				return 0, err
			}
			lo, hi = v, v
			if hasStep {
				hi = f.max // a/s: from a to the maximum
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func value(s string, f field) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", v, f.min, f.max)
	}
	return v, nil
}

// matchDay says whether the expression fires on a calendar date.
func (e *Expr) matchDay(d time.Time) bool {
	if e.month&(1<<uint(d.Month())) == 0 {
		return false
	}
	dom := e.dom&(1<<uint(d.Day())) != 0
	dow := e.dow&(1<<uint(d.Weekday())) != 0
	if e.domRestricted && e.dowRestrict {
		return dom || dow
	}
	return dom && dow
}

// Prev returns the latest firing at or before t in loc; false when there
// is none within Horizon.
func (e *Expr) Prev(t time.Time, loc *time.Location) (time.Time, bool) {
	y, m, d := t.In(loc).Date()
	// From the day after t's: around a backward clock change a later wall
	// time can be an earlier instant. Firings are in wall-clock order, so
	// the first one at or before t, walking back, is the latest.
	day := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < horizonDays; i++ {
		cd := day.AddDate(0, 0, -i)
		if !e.matchDay(cd) {
			continue
		}
		for h := 23; h >= 0; h-- {
			if e.hour&(1<<h) == 0 {
				continue
			}
			first := bits.TrailingZeros64(e.minute)
			if at(cd, h, first, loc).After(t) {
				continue // the hour's first firing is after t: all are
			}
			for mi := 59; mi >= first; mi-- {
				if e.minute&(1<<mi) == 0 {
					continue
				}
				if x := at(cd, h, mi, loc); !x.After(t) {
					return x, true
				}
			}
		}
	}
	return time.Time{}, false
}

// Next returns the earliest firing after t in loc; false when there is
// none within Horizon.
func (e *Expr) Next(t time.Time, loc *time.Location) (time.Time, bool) {
	y, m, d := t.In(loc).Date()
	day := time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < horizonDays; i++ {
		cd := day.AddDate(0, 0, i)
		if !e.matchDay(cd) {
			continue
		}
		for h := 0; h < 24; h++ {
			if e.hour&(1<<h) == 0 {
				continue
			}
			last := 63 - bits.LeadingZeros64(e.minute)
			if !at(cd, h, last, loc).After(t) {
				continue // the hour's last firing is not after t: none is
			}
			for mi := 0; mi <= last; mi++ {
				if e.minute&(1<<mi) == 0 {
					continue
				}
				if x := at(cd, h, mi, loc); x.After(t) {
					return x, true
				}
			}
		}
	}
	return time.Time{}, false
}

// at is the instant a wall time of a calendar date fires in loc: its first
// occurrence, or the end of the gap when the clocks skip it.
func at(day time.Time, h, mi int, loc *time.Location) time.Time {
	y, m, d := day.Date()
	wall := time.Date(y, m, d, h, mi, 0, 0, time.UTC)
	// The offsets in force around that wall time: before and after any
	// change near it.
	var offsets [3]int
	_, offsets[0] = wall.Add(-26 * time.Hour).In(loc).Zone()
	_, offsets[1] = wall.Add(26 * time.Hour).In(loc).Zone()
	_, offsets[2] = time.Date(y, m, d, h, mi, 0, 0, loc).Zone()
	var best time.Time
	lowest := offsets[0]
	for _, off := range offsets {
		lowest = min(lowest, off)
		c := wall.Add(-time.Duration(off) * time.Second)
		if !sameWall(c.In(loc), wall) {
			continue
		}
		if best.IsZero() || c.Before(best) {
			best = c
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: read with the offset before the change, the wall time
	// lies after it; the zone it lands in began when the gap ended.
	c := wall.Add(-time.Duration(lowest) * time.Second).In(loc)
	start, _ := c.ZoneBounds()
	if start.IsZero() || start.After(c) {
		return c
	}
	return start
}

func sameWall(t, wall time.Time) bool {
	y, m, d := t.Date()
	wy, wm, wd := wall.Date()
	return y == wy && m == wm && d == wd && t.Hour() == wall.Hour() && t.Minute() == wall.Minute()
}

var (
	locMu   sync.Mutex
	locs    = map[string]*time.Location{}
	locErrs = map[string]error{}
)

// LoadLocation is time.LoadLocation for IANA names, remembered: schedules
// are evaluated on every pass. "" and "Local" are refused (the server's
// own zone is not a property of a resource).
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "Local") {
		return nil, fmt.Errorf("time zone %q: give an IANA name such as UTC or Europe/Berlin", name)
	}
	locMu.Lock()
	defer locMu.Unlock()
	if l, ok := locs[name]; ok {
		return l, nil
	}
	if err, ok := locErrs[name]; ok {
		return nil, err
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		err = fmt.Errorf("time zone %q is not an IANA time zone name (such as UTC or Europe/Berlin): %w", name, err)
		if len(locErrs) < 1000 {
			locErrs[name] = err
		}
		return nil, err
	}
	locs[name] = l
	return l, nil
}
