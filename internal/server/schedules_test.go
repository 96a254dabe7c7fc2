package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Schedules over HTTP: set by PUT, kept by GET, replaced by PATCH, a bad
// entry refused with its field as target; activeSchedule cannot be set by
// a client.
func TestComputeSchedules(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.create("sched", computeBody(func(m map[string]any) {
		inner(m)["schedules"] = []map[string]any{
			{"name": "nights", "cron": "0 20 * * 1-5", "timeZone": "Europe/Berlin", "maxNodeCount": 0},
			{"name": "mornings", "cron": "0 7 * * 1-5", "restore": true},
		}
		inner(m)["activeSchedule"] = map[string]any{"name": "forged", "maxNodeCount": 9}
	}))
	s := c.Aml().Schedules
	if len(s) != 2 || s[0].TimeZone != "Europe/Berlin" || s[1].TimeZone != "UTC" || !s[1].Restore {
		t.Fatalf("schedules after PUT = %+v", s)
	}
	if a := c.Aml().ActiveSchedule; a != nil && a.Name == "forged" {
		t.Fatalf("a client set activeSchedule: %+v", a)
	}

	h.do("PATCH", computePath("sched"), `{"properties":{"properties":{"schedules":[{"name":"weekend","cron":"0 0 * * 6","maxNodeCount":1}]}}}`).want(t, 200)
	got := h.do("GET", computePath("sched"), nil).want(t, 200).compute(t)
	if s := got.Aml().Schedules; len(s) != 1 || s[0].Name != "weekend" || *got.Aml().ScaleSettings.MaxNodeCount != 2 {
		t.Fatalf("after PATCH: schedules %+v scale %+v", s, got.Aml().ScaleSettings)
	}

	for name, tc := range map[string]struct{ entry, target string }{
		"bad cron":     {`{"name":"n","cron":"0 20 * *","maxNodeCount":0}`, "properties.properties.schedules[0].cron"},
		"unknown zone": {`{"name":"n","cron":"0 20 * * *","timeZone":"Europe/Atlantis","maxNodeCount":0}`, "properties.properties.schedules[0].timeZone"},
		"min over max": {`{"name":"n","cron":"0 20 * * *","minNodeCount":2,"maxNodeCount":1}`, "properties.properties.schedules[0].minNodeCount"},
	} {
		t.Run(name, func(t *testing.T) {
			var e api.ErrorResponse
			h.do("PATCH", computePath("sched"), `{"properties":{"properties":{"schedules":[`+tc.entry+`]}}}`).want(t, 400, "ValidationError").json(t, &e)
			if e.Error.Target != tc.target {
				t.Errorf("target %q (%s), want %q", e.Error.Target, e.Error.Message, tc.target)
			}
		})
	}

	h.do("PATCH", computePath("sched"), `{"properties":{"properties":{"schedules":[]}}}`).want(t, 200)
	if r := h.do("GET", computePath("sched"), nil).want(t, 200); strings.Contains(string(r.Body), `"schedules"`) {
		t.Errorf("GET after PATCH []: %s; want no schedules", r.Body)
	}
}
