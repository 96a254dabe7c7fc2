package controller

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/metrics/metricstest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cumulus-ml/cumulus/internal/metrics"
)

// The controller feeds the event metrics: nodes requested (the refused
// one too) and removed (the refused one too), provider refusals and every
// pass.
func TestControllerFeedsMetrics(t *testing.T) {
	h := newHarness(t)
	m := metrics.New(metrics.Options{})
	h.c.Metrics = m
	h.db.SetObserver(m)
	c := h.compute("cpu", 0, 2, "PT5S")
	h.submit(c, 1)
	h.submit(c, 1)
	h.prov.NextCreateErr = errProvider
	h.pass() // the first create fails: backoff
	h.clk.Step(time.Second)
	h.pass() // two nodes requested
	h.register(c)
	h.pass() // both jobs assigned
	for _, n := range h.nodes(c) {
		if n.JobID != "" {
			h.finish(n.JobID, 0)
		}
	}
	h.clk.Step(5 * time.Second)
	h.heartbeat(c)
	h.pass() // idle past 5 s: both removed

	want := map[string]float64{
		"cumulus_scale_ups_total":               3,
		"cumulus_scale_downs_total":             3,
		"cumulus_node_provision_failures_total": 1,
		"cumulus_controller_pass_seconds":       4, // observations
		"cumulus_job_transitions_total":         0, // not summed here
		"cumulus_preemptions_total":             0,
		"cumulus_node_provision_seconds":        0,
	}
	mfs, err := metricstest.Gatherer(m.Handler()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			switch {
			case s.GetCounter() != nil && mf.GetName() != "cumulus_job_transitions_total":
				got[mf.GetName()] += s.GetCounter().GetValue()
			case s.GetHistogram() != nil:
				got[mf.GetName()] += float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %v, want %v", name, got[name], w)
		}
	}
	if n, _ := testutil.GatherAndCount(metricstest.Gatherer(m.Handler()), "cumulus_node_provision_failures_total"); n != 1 {
		t.Errorf("%d provisioning failure series, want 1 (create_error)", n)
	}

	// A node whose agent never registers counts as a timeout.
	h.submit(c, 1)
	h.pass()
	h.clk.Step(15*time.Minute + time.Second)
	h.pass()
	if byReason := failuresByReason(t, m); byReason[metrics.ReasonCreate] != 1 || byReason[metrics.ReasonTimeout] != 1 || len(byReason) != 2 {
		t.Errorf("provisioning failures by reason = %v, want create_error 1 and timeout 1", byReason)
	}
}

// failuresByReason sums cumulus_node_provision_failures_total by reason.
func failuresByReason(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := metricstest.Gatherer(m.Handler()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "cumulus_node_provision_failures_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" {
					byReason[l.GetValue()] += s.GetCounter().GetValue()
				}
			}
		}
	}
	return byReason
}
