package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// scheduled stores a compute with a nights/mornings schedule in
// Europe/Berlin: maxNodeCount 0 from 20:00, its own settings from 07:00.
func (h *harness) scheduled(name string, min, max int32) api.Compute {
	h.t.Helper()
	zero := int32(0)
	c := api.Compute{Name: name, Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{VMSize: "Standard_DS3_v2",
			ScaleSettings: &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT60S"},
			Schedules: []api.ScaleSchedule{
				{Name: "nights", Cron: "0 20 * * *", TimeZone: "Europe/Berlin", MaxNodeCount: &zero},
				{Name: "mornings", Cron: "0 7 * * *", TimeZone: "Europe/Berlin", Restore: true},
			}}}}
	if err := api.PrepareCompute(&c, name, nil, "local"); err != nil {
		h.t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = h.sc.ComputeID(name), api.StateSucceeded
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), name, c, 0, h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// passAt moves the clock to t (UTC), lets every agent poll and makes a
// pass; it returns when the controller asked to be woken.
func (h *harness) passAt(c api.Compute, t time.Time) time.Time {
	h.t.Helper()
	h.clk.Set(t)
	h.heartbeat(c)
	wake, err := h.c.RunOnce(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return wake
}

func (h *harness) scheduleEvents(c api.Compute) []store.Event {
	h.t.Helper()
	evs, err := store.Events(h.ctx, h.db.Q(), store.EventFilter{Compute: c.ID, Types: []string{api.EventScheduleApplied}})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// A schedule stops the cluster at 20:00 and restores it at 07:00 (Berlin,
// CET = UTC+1 in November): a job running at 20:00 finishes on its node,
// which is removed after; a job submitted at night waits, its reason
// naming the schedule, and runs at 07:00, when the controller wakes by
// itself.
func TestScheduleStopsTheClusterAtNightAndRestoresItInTheMorning(t *testing.T) {
	h := newHarness(t)
	h.clk.Set(utc("2026-11-21 17:00")) // Saturday 18:00 CET
	c := h.scheduled("cpu", 0, 2)

	if wake := h.passAt(c, utc("2026-11-21 18:00")); !wake.Equal(utc("2026-11-21 19:00")) {
		t.Fatalf("an empty cluster asks to be woken at %s, want 19:00 UTC (20:00 CET, when nights fires)", wake)
	}
	if a := h.storedCompute(c).Aml().ActiveSchedule; a == nil || a.Name != "mornings" || a.MaxNodeCount != 2 {
		t.Fatalf("active schedule at 19:00 CET = %+v, want mornings with the cluster's own max 2", a)
	}
	running := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	if st := h.job(running).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("job before 20:00 is %s, want Preparing", st)
	}

	// 20:00 CET: nights. The busy node drains; its job is not stopped.
	h.passAt(c, utc("2026-11-21 19:00"))
	if cnt := h.counts(c); cnt[api.NodeLeaving] != 1 || len(h.prov.DeleteCalls) != 0 {
		t.Fatalf("nodes at 20:00 = %v, deleted %v; want the busy node leaving, nothing deleted", cnt, h.prov.DeleteCalls)
	}
	if st := h.job(running).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("the running job is %s at 20:00; want it left alone", st)
	}
	a := h.storedCompute(c).Aml()
	if s := a.ActiveSchedule; s == nil || s.Name != "nights" || s.MaxNodeCount != 0 || !s.Since.Equal(utc("2026-11-21 19:00")) ||
		s.NextChange == nil || !s.NextChange.Equal(utc("2026-11-22 06:00")) || s.NextSchedule != "mornings" {
		t.Fatalf("active schedule at 20:00 = %+v, want nights (max 0) until 07:00 CET (mornings)", s)
	}

	// 21:00: a new job waits, and the compute says why.
	h.clk.Set(utc("2026-11-21 20:00"))
	waiting := h.submit(c, 1)
	wake := h.passAt(c, utc("2026-11-21 20:00"))
	if st := h.job(waiting).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("job submitted at 21:00 is %s, want Queued", st)
	}
	if len(h.prov.Created) != 1 {
		t.Fatalf("provider created %v at night, want only the first node", h.prov.Created)
	}
	msg := ""
	for _, e := range h.storedCompute(c).Aml().Errors {
		if e.Error.Code == "ScaleUpBlocked" {
			msg = e.Error.Message
		}
	}
	t.Logf("ScaleUpBlocked: %s", msg)
	if !strings.Contains(msg, `maxNodeCount 0, set by schedule "nights"`) || !strings.Contains(msg, "07:00 CET") {
		t.Fatalf("ScaleUpBlocked = %q; want it to name the schedule nights and when it ends", msg)
	}
	if wake.After(utc("2026-11-22 06:00")) {
		t.Fatalf("controller asks to be woken at %s, after the morning schedule", wake)
	}

	// 21:30: the first job ends; its node goes.
	h.clk.Set(utc("2026-11-21 20:30"))
	h.finish(running, 0)
	wake = h.passAt(c, utc("2026-11-21 20:30"))
	if n := len(h.nodes(c)); n != 0 || len(h.prov.DeleteCalls) != 1 {
		t.Fatalf("nodes after the drained job ended = %d, deleted %v; want it removed", n, h.prov.DeleteCalls)
	}
	if h.job(running).Doc.Properties.Status != api.JobCompleted {
		t.Fatalf("the job running at 20:00 is %s, want Completed", h.job(running).Doc.Properties.Status)
	}
	if !wake.Equal(utc("2026-11-22 06:00")) {
		t.Fatalf("the stopped cluster asks to be woken at %s, want 06:00 UTC (07:00 CET)", wake)
	}

	// 06:59 CET: still night.
	h.passAt(c, utc("2026-11-22 05:59"))
	if len(h.nodes(c)) != 0 {
		t.Fatal("a node was created before 07:00")
	}
	// 07:00 CET: the cluster grows and runs the waiting job.
	h.passAt(c, utc("2026-11-22 06:00"))
	if cnt := h.counts(c); cnt[api.NodePreparing] != 1 {
		t.Fatalf("nodes at 07:00 = %v, want one preparing", cnt)
	}
	h.register(c)
	h.pass()
	if st := h.job(waiting).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("the waiting job is %s at 07:00, want Preparing", st)
	}
	if s := h.storedCompute(c).Aml().ActiveSchedule; s == nil || s.Name != "mornings" || s.MaxNodeCount != 2 {
		t.Fatalf("active schedule at 07:00 = %+v, want mornings", s)
	}

	evs := h.scheduleEvents(c) // newest first
	var got []string
	for _, e := range evs {
		got = append(got, e.To)
	}
	if strings.Join(got, ",") != "mornings,nights,mornings" {
		t.Fatalf("ScheduleApplied events (newest first) = %v; want mornings, nights, mornings (one per change)", got)
	}
	if e := evs[1]; !e.Time.Equal(utc("2026-11-21 19:00")) || !strings.Contains(e.Message, `"nights" applied: minNodeCount 0, maxNodeCount 0 until Sun 2026-11-22 07:00 CET`) {
		t.Fatalf("nights event = %s %q", e.Time, e.Message)
	}
}

// Across the night the clocks go back (Europe/Berlin, Sunday 25 October
// 2026, 03:00 CEST → 02:00 CET): nights fires at 20:00 CEST (18:00 UTC),
// mornings at 07:00 CET (06:00 UTC), thirteen hours later.
func TestScheduleAcrossTheAutumnClockChange(t *testing.T) {
	h := newHarness(t)
	h.clk = clock.NewFake(utc("2026-10-24 17:00"))
	h.c = h.newClusters()
	c := h.scheduled("cpu", 0, 1)
	if wake := h.passAt(c, utc("2026-10-24 17:00")); !wake.Equal(utc("2026-10-24 18:00")) {
		t.Fatalf("woken at %s, want 18:00 UTC (20:00 CEST)", wake)
	}
	h.clk.Set(utc("2026-10-24 18:00"))
	j := h.submit(c, 1)
	if wake := h.passAt(c, utc("2026-10-24 18:00")); !wake.Equal(utc("2026-10-25 06:00")) {
		t.Fatalf("at night the controller asks to be woken at %s, want 06:00 UTC (07:00 CET, after the change)", wake)
	}
	for _, at := range []string{"2026-10-25 00:30", "2026-10-25 01:30", "2026-10-25 05:00", "2026-10-25 05:59"} {
		h.passAt(c, utc(at))
		if len(h.nodes(c)) != 0 || h.job(j).Doc.Properties.Status != api.JobQueued {
			t.Fatalf("at %s UTC: nodes %v job %s; want the night to hold", at, h.counts(c), h.job(j).Doc.Properties.Status)
		}
	}
	h.passAt(c, utc("2026-10-25 06:00"))
	h.register(c)
	h.pass()
	if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("job at 07:00 CET is %s, want Preparing", st)
	}
	if evs := h.scheduleEvents(c); len(evs) != 3 {
		t.Fatalf("ScheduleApplied events = %d, want 3 (mornings in force at first, nights, mornings)", len(evs))
	}
}
