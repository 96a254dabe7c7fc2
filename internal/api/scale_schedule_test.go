package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const tgtSched = "properties.properties.schedules"

func nights() api.ScaleSchedule {
	return api.ScaleSchedule{Name: "nights", Cron: "0 20 * * 1-5", TimeZone: "Europe/Berlin", MaxNodeCount: vi32(0)}
}

func mornings() api.ScaleSchedule {
	return api.ScaleSchedule{Name: "mornings", Cron: "0 7 * * 1-5", TimeZone: "Europe/Berlin", Restore: true}
}

func withSchedules(s ...api.ScaleSchedule) func(*api.Compute) {
	return func(c *api.Compute) {
		c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(1), MaxNodeCount: vi32(6)}
		c.Aml().Schedules = s
	}
}

func TestSchedulesValidation(t *testing.T) {
	many := make([]api.ScaleSchedule, api.MaxSchedules+1)
	for i := range many {
		many[i] = api.ScaleSchedule{Name: fmt.Sprint("s", i), Cron: "@daily", MaxNodeCount: vi32(1)}
	}
	mod := func(f func(*api.ScaleSchedule)) api.ScaleSchedule {
		s := nights()
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name   string
		scheds []api.ScaleSchedule
		target string
		msg    string
	}{
		{"bad cron", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.Cron = "0 25 * * *" })}, tgtSched + "[0].cron", "hour field"},
		{"never fires", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.Cron = "0 0 30 2 *" })}, tgtSched + "[0].cron", "never fires"},
		{"unknown zone", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.TimeZone = "Europe/Atlantis" })}, tgtSched + "[0].timeZone", "Europe/Atlantis"},
		{"server's local zone", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.TimeZone = "Local" })}, tgtSched + "[0].timeZone", "IANA"},
		{"min above max", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.MinNodeCount, s.MaxNodeCount = vi32(3), vi32(2) })}, tgtSched + "[0].minNodeCount", "may not exceed"},
		{"min above the cluster's max", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.MinNodeCount, s.MaxNodeCount = vi32(7), nil })}, tgtSched + "[0].minNodeCount", "cluster's maxNodeCount (6)"},
		{"negative max", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.MaxNodeCount = vi32(-1) })}, tgtSched + "[0].maxNodeCount", "negative"},
		{"max above the limit", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.MaxNodeCount = vi32(api.MaxClusterNodes + 1) })}, tgtSched + "[0].maxNodeCount", "at most 10000"},
		{"restore with bounds", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.Restore = true })}, tgtSched + "[0].restore", "without minNodeCount"},
		{"sets nothing", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.MaxNodeCount = nil })}, tgtSched + "[0]", "sets nothing"},
		{"no name", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.Name = "" })}, tgtSched + "[0].name", "needs a name"},
		{"bad name", []api.ScaleSchedule{mod(func(s *api.ScaleSchedule) { s.Name = "a b" })}, tgtSched + "[0].name", "only letters"},
		{"duplicate names", []api.ScaleSchedule{nights(), mornings(), mod(func(s *api.ScaleSchedule) { s.Name = "Nights" })}, tgtSched + "[2].name", "used twice"},
		{"too many", many, tgtSched, "at most 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valCompute()
			withSchedules(tc.scheds...)(c)
			e := wantAPIError(t, api.PrepareCompute(c, "cpu-cluster", nil, defLoc), api.CodeValidationError, tc.target)
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not say %q", e.Message, tc.msg)
			}
		})
	}
	c := prepared(t, withSchedules(nights(), mornings(), api.ScaleSchedule{Name: "utc", Cron: "0 12 * * 0", MinNodeCount: vi32(0)}))
	if z := c.Aml().Schedules[2].TimeZone; z != "UTC" {
		t.Errorf("time zone of an entry without one = %q, want UTC", z)
	}
}

func TestApplyUpdateSchedules(t *testing.T) {
	c := prepared(t, withSchedules(nights(), mornings()))
	// A PATCH without schedules keeps them.
	if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MaxNodeCount: vi32(8)}}); err != nil {
		t.Fatal(err)
	}
	if len(c.Aml().Schedules) != 2 {
		t.Fatalf("schedules after a scale PATCH = %+v, want both kept", c.Aml().Schedules)
	}
	// Given, they replace the stored ones and are checked.
	bad := []api.ScaleSchedule{{Name: "x", Cron: "nope", MaxNodeCount: vi32(0)}}
	wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{Schedules: &bad}), api.CodeValidationError, tgtSched+"[0].cron")
	none := []api.ScaleSchedule{}
	c = prepared(t, withSchedules(nights(), mornings()))
	if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{Schedules: &none}); err != nil {
		t.Fatal(err)
	}
	if len(c.Aml().Schedules) != 0 {
		t.Fatalf("schedules after PATCH [] = %+v, want none", c.Aml().Schedules)
	}
}

func TestScaleAt(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(s string) time.Time {
		x, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	c := prepared(t, withSchedules(nights(), mornings(),
		api.ScaleSchedule{Name: "weekend", Cron: "0 0 * * 6", TimeZone: "Europe/Berlin", MinNodeCount: vi32(0)}))
	for _, tc := range []struct {
		now      string
		min, max int
		active   string
		next     string
	}{
		{"2026-01-14 12:00", 1, 6, "mornings", "2026-01-14 20:00"}, // Wednesday: restored
		{"2026-01-14 20:00", 0, 0, "nights", "2026-01-15 07:00"},   // own min 1 above max 0: max wins
		{"2026-01-15 06:59", 0, 0, "nights", "2026-01-15 07:00"},
		{"2026-01-17 10:00", 0, 6, "weekend", "2026-01-19 07:00"}, // Saturday: min 0, own max
		{"2026-01-16 23:59", 0, 0, "nights", "2026-01-17 00:00"},  // Friday night
		{"2026-03-30 06:00", 0, 6, "weekend", "2026-03-30 07:00"}, // Monday after spring forward
		{"2026-03-31 06:00", 0, 0, "nights", "2026-03-31 07:00"},  // Tuesday: nights from Monday 20:00 CEST
		{"2026-10-26 06:59", 0, 6, "weekend", "2026-10-26 07:00"}, // Monday after fall back
		{"2026-10-27 06:59", 0, 0, "nights", "2026-10-27 07:00"},
		{"2026-10-26 07:00", 1, 6, "mornings", "2026-10-26 20:00"},
		{"2026-01-14 19:59", 1, 6, "mornings", "2026-01-14 20:00"},
		{"2026-01-18 12:00", 0, 6, "weekend", "2026-01-19 07:00"},  // Sunday
		{"2026-01-19 07:00", 1, 6, "mornings", "2026-01-19 20:00"}, // Monday
		{"2026-01-19 08:00", 1, 6, "mornings", "2026-01-19 20:00"},
		{"2026-01-20 20:30", 0, 0, "nights", "2026-01-21 07:00"},
		{"2026-01-24 00:00", 0, 6, "weekend", "2026-01-26 07:00"}, // Saturday midnight
		{"2026-01-23 20:00", 0, 0, "nights", "2026-01-24 00:00"},
		{"2026-01-26 06:00", 0, 6, "weekend", "2026-01-26 07:00"}, // Monday before mornings
		{"2026-01-26 07:00", 1, 6, "mornings", "2026-01-26 20:00"},
		{"2026-01-26 19:00", 1, 6, "mornings", "2026-01-26 20:00"},
		{"2026-01-26 21:00", 0, 0, "nights", "2026-01-27 07:00"},
		{"2026-01-27 07:00", 1, 6, "mornings", "2026-01-27 20:00"},
		{"2026-01-31 00:00", 0, 6, "weekend", "2026-02-02 07:00"},
		{"2026-02-02 06:00", 0, 6, "weekend", "2026-02-02 07:00"},
		{"2026-02-02 07:00", 1, 6, "mornings", "2026-02-02 20:00"},
		{"2026-02-02 20:00", 0, 0, "nights", "2026-02-03 07:00"},
		{"2026-02-03 07:00", 1, 6, "mornings", "2026-02-03 20:00"},
		{"2026-02-06 20:00", 0, 0, "nights", "2026-02-07 00:00"},
		{"2026-02-07 00:00", 0, 6, "weekend", "2026-02-09 07:00"},
		{"2026-02-09 07:00", 1, 6, "mornings", "2026-02-09 20:00"},
		{"2026-02-09 20:00", 0, 0, "nights", "2026-02-10 07:00"},
		{"2026-02-10 07:00", 1, 6, "mornings", "2026-02-10 20:00"},
	} {
		now := at(tc.now)
		min, max, active, next := c.ScaleAt(now)
		if min != tc.min || max != tc.max || active == nil || active.Name != tc.active || !next.Equal(at(tc.next)) {
			t.Errorf("at %s: min %d max %d active %+v next %s; want %d %d %s next %s", tc.now, min, max, active, next.In(berlin), tc.min, tc.max, tc.active, tc.next)
			continue
		}
		if active.MinNodeCount != int32(min) || active.MaxNodeCount != int32(max) || active.Since.After(now) || active.NextChange == nil || !active.NextChange.Equal(next) {
			t.Errorf("at %s: active %+v does not match", tc.now, active)
		}
	}

	// Without schedules: the cluster's own bounds, nothing in force.
	own := prepared(t, withSchedules())
	if min, max, active, next := own.ScaleAt(at("2026-01-14 12:00")); min != 1 || max != 6 || active != nil || !next.IsZero() {
		t.Errorf("no schedules: %d %d %+v %s", min, max, active, next)
	}
	// Entries firing at the same instant: the later in the list wins.
	tie := prepared(t, withSchedules(api.ScaleSchedule{Name: "a", Cron: "0 * * * *", MaxNodeCount: vi32(2)}, api.ScaleSchedule{Name: "b", Cron: "0 */2 * * *", MaxNodeCount: vi32(3)}))
	if _, max, active, _ := tie.ScaleAt(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)); max != 3 || active.Name != "b" {
		t.Errorf("tie at 10:00: max %d by %+v, want 3 by b", max, active)
	}
	if _, max, active, _ := tie.ScaleAt(time.Date(2026, 1, 1, 11, 30, 0, 0, time.UTC)); max != 2 || active.Name != "a" {
		t.Errorf("11:00: max %d by %+v, want 2 by a", max, active)
	}
	// A schedule may raise max above the cluster's own: jobs that need it
	// are accepted.
	if got := tie.LargestMax(); got != 6 {
		t.Errorf("LargestMax = %d, want the cluster's own 6", got)
	}
	big := prepared(t, withSchedules(api.ScaleSchedule{Name: "day", Cron: "0 8 * * *", MaxNodeCount: vi32(20)}))
	if got := big.LargestMax(); got != 20 {
		t.Errorf("LargestMax = %d, want 20 from the schedule", got)
	}
}
