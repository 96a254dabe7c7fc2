package cron

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseRefusesBadExpressions(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"", "has 0 fields"},
		{"0 20 * *", "has 4 fields"},
		{"0 20 * * 1-5 x", "has 6 fields"},
		{"60 * * * *", "minute field \"60\": 60 is out of range 0-59"},
		{"0 24 * * *", "hour field"},
		{"0 0 0 * *", "day-of-month field"},
		{"0 0 * 13 *", "month field"},
		{"0 0 * * 8", "day-of-week field"},
		{"0 5-1 * * *", "runs backwards"},
		{"*/0 * * * *", "not a positive number"},
		{"a * * * *", "\"a\" is not a number"},
		{"1,,2 * * * *", "empty list element"},
		{"@sometimes", "unknown macro"},
	} {
		_, err := Parse(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.expr, err, tc.want)
		}
	}
	for _, ok := range []string{"0 20 * * 1-5", "*/15 8-18/2 1,15 jan-MAR mon-fri", "5/10 * * * 7", "@daily", "@Weekly", "0 0 29 2 *"} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
}

func TestPrevAndNext(t *testing.T) {
	berlin, ny := mustLoc(t, "Europe/Berlin"), mustLoc(t, "America/New_York")
	utc := time.UTC
	at := func(loc *time.Location, s string) time.Time {
		t.Helper()
		x, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	u := func(s string) time.Time { return at(utc, s) }
	for _, tc := range []struct {
		name       string
		expr       string
		loc        *time.Location
		now        time.Time
		prev, next time.Time
	}{
		{"weekday evening, on a Wednesday", "0 20 * * 1-5", berlin, u("2026-01-14 12:00"), u("2026-01-13 19:00"), u("2026-01-14 19:00")},
		{"at the firing instant it has fired", "0 20 * * 1-5", berlin, u("2026-01-14 19:00"), u("2026-01-14 19:00"), u("2026-01-15 19:00")},
		{"weekend skipped", "0 20 * * 1-5", berlin, u("2026-01-17 12:00"), u("2026-01-16 19:00"), u("2026-01-19 19:00")},
		{"every 15 minutes", "*/15 * * * *", utc, u("2026-01-14 12:07"), u("2026-01-14 12:00"), u("2026-01-14 12:15")},
		{"day of month or day of week", "0 0 13 * 5", utc, u("2026-01-14 00:00"), u("2026-01-13 00:00"), u("2026-01-16 00:00")},
		{"day of month and a star step", "0 0 13 * */1", utc, u("2026-01-14 00:00"), u("2026-01-13 00:00"), u("2026-02-13 00:00")},
		{"Sunday as 7", "0 9 * * 7", utc, u("2026-01-14 00:00"), u("2026-01-11 09:00"), u("2026-01-18 09:00")},
		{"leap day", "0 0 29 2 *", utc, u("2026-01-14 00:00"), u("2024-02-29 00:00"), u("2028-02-29 00:00")},
		{"monthly across a year", "@monthly", utc, u("2026-12-31 23:59"), u("2026-12-01 00:00"), u("2027-01-01 00:00")},

		// Europe/Berlin, spring forward: 29 March 2026, 02:00 CET → 03:00 CEST (01:00 UTC).
		{"Berlin: 02:30 in the gap fires at 03:00 CEST", "30 2 * * *", berlin, u("2026-03-29 00:30"), u("2026-03-28 01:30"), u("2026-03-29 01:00")},
		{"Berlin: the gap firing, once", "30 2 * * *", berlin, u("2026-03-29 01:00"), u("2026-03-29 01:00"), u("2026-03-30 00:30")},
		{"Berlin: 20:00 before and after spring forward", "0 20 * * *", berlin, u("2026-03-29 12:00"), u("2026-03-28 19:00"), u("2026-03-29 18:00")},
		{"Berlin: every 10 minutes through the gap", "*/10 * * * *", berlin, u("2026-03-29 00:55"), u("2026-03-29 00:50"), u("2026-03-29 01:00")},
		{"Berlin: after the gap, 03:10 CEST", "*/10 * * * *", berlin, u("2026-03-29 01:00"), u("2026-03-29 01:00"), u("2026-03-29 01:10")},

		// Europe/Berlin, fall back: 25 October 2026, 03:00 CEST → 02:00 CET (01:00 UTC).
		{"Berlin: 02:30 fires at its first occurrence", "30 2 * * *", berlin, u("2026-10-24 12:00"), u("2026-10-24 00:30"), u("2026-10-25 00:30")},
		{"Berlin: not again at the second 02:30", "30 2 * * *", berlin, u("2026-10-25 01:15"), u("2026-10-25 00:30"), u("2026-10-26 01:30")},
		{"Berlin: in the repeated hour, the first 02:45 was before now", "45 2 * * *", berlin, u("2026-10-25 01:30"), u("2026-10-25 00:45"), u("2026-10-26 01:45")},
		{"Berlin: 07:00 after the night of the change", "0 7 * * *", berlin, u("2026-10-25 05:00"), u("2026-10-24 05:00"), u("2026-10-25 06:00")},
		{"Berlin: hourly through the repeated hour", "0 * * * *", berlin, u("2026-10-25 00:30"), u("2026-10-25 00:00"), u("2026-10-25 02:00")},

		// America/New_York: 8 March 2026 02:00 EST → 03:00 EDT (07:00 UTC);
		// 1 November 2026 02:00 EDT → 01:00 EST (06:00 UTC).
		{"New York: 02:30 in the gap fires at 03:00 EDT", "30 2 * * *", ny, u("2026-03-08 06:00"), u("2026-03-07 07:30"), u("2026-03-08 07:00")},
		{"New York: 01:30 fires once, in EDT", "30 1 * * *", ny, u("2026-11-01 05:00"), u("2026-10-31 05:30"), u("2026-11-01 05:30")},
		{"New York: not again at 01:30 EST", "30 1 * * *", ny, u("2026-11-01 06:15"), u("2026-11-01 05:30"), u("2026-11-02 06:30")},
		{"New York: weekday 07:00 after fall back", "0 7 * * 1-5", ny, u("2026-11-01 12:00"), u("2026-10-30 11:00"), u("2026-11-02 12:00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := e.Prev(tc.now, tc.loc); !ok || !got.Equal(tc.prev) {
				t.Errorf("Prev(%s) = %s (%v), want %s", tc.now.Format(time.RFC3339), got.UTC().Format(time.RFC3339), ok, tc.prev.Format(time.RFC3339))
			}
			if got, ok := e.Next(tc.now, tc.loc); !ok || !got.Equal(tc.next) {
				t.Errorf("Next(%s) = %s (%v), want %s", tc.now.Format(time.RFC3339), got.UTC().Format(time.RFC3339), ok, tc.next.Format(time.RFC3339))
			}
		})
	}
}

// A daily schedule fires exactly once on every day of a year, whatever
// the clock changes, and Next and Prev agree with each other.
func TestDailyFiresOncePerDayAcrossAYear(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe"} {
		loc := mustLoc(t, zone)
		for _, expr := range []string{"30 2 * * *", "0 1 * * *", "59 1 * * *", "0 20 * * *"} {
			e, err := Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			cur := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			end := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
			days := map[string]int{}
			for {
				next, ok := e.Next(cur, loc)
				if !ok || !next.Before(end) {
					break
				}
				if prev, _ := e.Prev(next, loc); !prev.Equal(next) {
					t.Fatalf("%s %s: Prev(%s) = %s, want the firing itself", zone, expr, next, prev)
				}
				if prev, _ := e.Prev(next.Add(-time.Nanosecond), loc); !prev.Before(next) {
					t.Fatalf("%s %s: Prev just before %s = %s", zone, expr, next, prev)
				}
				days[next.In(loc).Format("2006-01-02")]++
				cur = next
			}
			if len(days) != 365 {
				t.Errorf("%s %s fired on %d days of 2026, want 365", zone, expr, len(days))
			}
			for d, n := range days {
				if n != 1 {
					t.Errorf("%s %s fired %d times on %s", zone, expr, n, d)
				}
			}
		}
	}
}

func TestNeverFiring(t *testing.T) {
	e, err := Parse("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); ok {
		t.Fatal("30 February fired")
	}
}

func TestLoadLocation(t *testing.T) {
	for _, bad := range []string{"", "Local", "Mars/Olympus", "../etc/passwd"} {
		if _, err := LoadLocation(bad); err == nil {
			t.Errorf("LoadLocation(%q) accepted", bad)
		}
	}
	if l, err := LoadLocation("Europe/Berlin"); err != nil || l.String() != "Europe/Berlin" {
		t.Fatalf("LoadLocation(Europe/Berlin) = %v, %v", l, err)
	}
}
