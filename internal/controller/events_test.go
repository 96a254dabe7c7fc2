package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// history reads a compute's events, oldest first, as "Type node".
func (h *harness) history(c api.Compute) ([]string, []store.Event) {
	h.t.Helper()
	evs, err := store.Events(h.ctx, h.db.Q(), store.EventFilter{Compute: c.ID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Reverse(evs)
	var out []string
	for _, e := range evs {
		out = append(out, strings.TrimSpace(e.Type+" "+e.Node))
	}
	return out, evs
}

// A cluster growing for two jobs at maxNodeCount 1 and shrinking after
// its idle time leaves its story in the history, with the clock's times:
// the node requested and the resize starting, the second job blocked at
// the maximum, the node ready and the resize ending at 1 node, idle after
// each job, leaving and removed when idle too long, and the resize to 0
// nodes (started and ended in that pass).
func TestClusterHistoryFromScaleUpToScaleDown(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT60S")
	a, b := h.submit(c, 1), h.submit(c, 1)
	h.pass()
	h.clk.Step(30 * time.Second)
	h.register(c)
	h.pass()
	h.clk.Step(10 * time.Second)
	h.finish(a, 0)
	h.pass()
	h.clk.Step(10 * time.Second)
	h.finish(b, 0)
	h.pass()
	h.clk.Step(61 * time.Second)
	h.heartbeat(c)
	h.pass()
	h.pass()

	got, evs := h.history(c)
	node := "cpu-node-1"
	want := []string{
		"NodeRequested " + node, "ResizeStarted", "ScaleUpBlocked",
		"NodeReady " + node, "ResizeEnded",
		"NodeIdle " + node, "NodeIdle " + node,
		"NodeLeaving " + node, "NodeRemoved " + node, "ResizeStarted", "ResizeEnded",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if e := evs[2]; !strings.Contains(e.Message, "maxNodeCount") {
		t.Errorf("blocked event says %q, want the maxNodeCount named", e.Message)
	}
	if e := evs[3]; !e.Time.Equal(t0.Add(30*time.Second)) || e.DurationSeconds == nil || *e.DurationSeconds != 30 {
		t.Errorf("ready event %+v, want at +30s after 30 s", e)
	}
	if e := evs[4]; e.DurationSeconds == nil || *e.DurationSeconds != 30 || *e.Current != 1 {
		t.Errorf("first resize ended %+v, want 30 s at 1 node", e)
	}
	if e := evs[7]; e.Reason != "scaled down: no queued job needs it" {
		t.Errorf("leaving reason %q", e.Reason)
	}
	if e := evs[10]; *e.Current != 0 || *e.Target != 0 {
		t.Errorf("last resize ended %+v, want at 0 nodes", e)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time.Before(evs[i-1].Time) {
			t.Errorf("event %d (%s at %v) before the one ahead of it (%v)", i, evs[i].Type, evs[i].Time, evs[i-1].Time)
		}
	}
}

// A provider failure is in the history once per reason, not once per pass.
func TestProvisioningFailureRecordedOnce(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT120S")
	h.submit(c, 1)
	h.prov.NextCreateErr = errProvider
	h.pass()
	h.pass()
	got, evs := h.history(c)
	n := 0
	for i, typ := range got {
		if typ == api.EventProvisioningFailed {
			n++
			if !strings.Contains(evs[i].Message, "could not create node") {
				t.Errorf("failure event says %q", evs[i].Message)
			}
		}
	}
	if n != 1 {
		t.Fatalf("history %v: %d provisioning failures, want 1", got, n)
	}
}

// Events older than the retention go, in batches, and newer ones stay.
func TestEventRetentionPrunesOldEvents(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 1, "PT60S")
	for i := range eventPruneBatch + 10 {
		e := store.Event{Compute: c.ID, Type: api.EventNodeIdle, Time: t0.Add(-48 * time.Hour).Add(time.Duration(i) * time.Millisecond)}
		if err := store.AddEvent(h.ctx, h.db.W(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.AddEvent(h.ctx, h.db.W(), store.Event{Compute: c.ID, Type: api.EventNodeReady, Time: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r := &EventRetention{DB: h.db, Clock: h.clk, Keep: 24 * time.Hour}
	n, err := r.Prune(h.ctx)
	if err != nil || n != eventPruneBatch+10 {
		t.Fatalf("pruned %d (%v), want %d", n, err, eventPruneBatch+10)
	}
	got, _ := h.history(c)
	if !slices.Equal(got, []string{api.EventNodeReady}) {
		t.Fatalf("left %v, want the event of an hour ago", got)
	}
}
