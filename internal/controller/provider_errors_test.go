package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// provisioningEvents are the messages of a compute's ProvisioningFailed
// events, oldest first.
func (h *harness) provisioningEvents(c api.Compute) []string {
	h.t.Helper()
	types, evs := h.history(c)
	var out []string
	for i, typ := range types {
		if typ == api.EventProvisioningFailed {
			out = append(out, evs[i].Message)
		}
	}
	return out
}

// update plays a user's PUT of the compute: its settings change and
// modifiedOn with them.
func (h *harness) update(c api.Compute) {
	h.t.Helper()
	d, err := store.Get[api.Compute](h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	now := h.clk.Now()
	d.Value.Properties.ModifiedOn = &now
	if _, err := store.Put(h.ctx, h.db.Q(), store.KindCompute, h.sc.WorkspaceID(), c.Name, d.Value, d.Version, now); err != nil {
		h.t.Fatal(err)
	}
}

// A provider out of capacity: the compute and its history say so, the
// controller backs off (no call while it does) and gets the node once the
// backoff has passed and capacity is back.
func TestInsufficientCapacityBacksOffAndSaysSo(t *testing.T) {
	h := newHarness(t)
	m := metrics.New(metrics.Options{})
	h.c.Metrics = m
	c := h.compute("cpu", 0, 1, "PT120S")
	uid := h.submit(c, 1)
	h.prov.AllowedCreateCalls = 0 // a cloud with no room
	h.pass()
	msg := errorCodes(h.storedCompute(c))["NodeProvisioningFailed"]
	if !strings.Contains(msg, "no capacity") || !strings.Contains(msg, "AllowedCreateCalls are used up") {
		t.Fatalf("compute error %q; want it to say the provider has no capacity, in its words", msg)
	}
	j := h.job(uid).Doc
	if why := api.QueueReason(*h.storedCompute(c), &j, uid); !strings.Contains(why, msg) {
		t.Fatalf("the job's reason after the failed pass is %q; want the provider's failure", why)
	}
	if evs := h.provisioningEvents(c); len(evs) != 1 || evs[0] != msg {
		t.Fatalf("ProvisioningFailed events %q; want one with the compute's error", evs)
	}
	h.prov.AllowedCreateCalls = 10 // room again, but the controller waits out its backoff
	h.clk.Step(500 * time.Millisecond)
	h.pass()
	if n := len(h.prov.CreateCalls); n != 1 {
		t.Fatalf("%d Create calls during the backoff; want 1", n)
	}
	h.clk.Step(500 * time.Millisecond)
	h.pass()
	if len(h.prov.Created) != 1 || len(h.nodes(c)) == 0 {
		t.Fatalf("created %v once the backoff passed; want the node", h.prov.Created)
	}
	if got := failuresByReason(t, m); got[metrics.ReasonCapacity] != 1 || len(got) != 1 {
		t.Errorf("provisioning failures by reason = %v; want insufficient_capacity 1", got)
	}
}

// A configuration error: the compute shows the provider's words, the
// controller does not try again on the exponential backoff's schedule
// (the same call would fail the same way) but at once when the compute is
// updated, and at the latest after the longest backoff.
func TestConfigurationErrorWaitsForTheComputeToChange(t *testing.T) {
	h := newHarness(t)
	m := metrics.New(metrics.Options{})
	h.c.Metrics = m
	c := h.compute("cpu", 0, 1, "PT120S")
	h.submit(c, 1)
	words := `namespace "ml-team" not found`
	h.prov.NextCreateErr = provider.Configurationf("%s", words)
	h.pass()
	msg := errorCodes(h.storedCompute(c))["NodeProvisioningFailed"]
	if !strings.Contains(msg, words) || !strings.Contains(msg, "when the compute is updated") {
		t.Fatalf("compute error %q; want the provider's words and when it is tried again", msg)
	}
	if evs := h.provisioningEvents(c); len(evs) != 1 || !strings.Contains(evs[0], words) {
		t.Fatalf("ProvisioningFailed events %q; want one in the provider's words", evs)
	}
	h.clk.Step(time.Minute) // an exponential backoff would have tried five times
	h.pass()
	if n := len(h.prov.CreateCalls); n != 1 {
		t.Fatalf("%d Create calls a minute after a configuration error, the compute unchanged; want 1", n)
	}
	h.update(c)
	h.pass()
	if len(h.prov.CreateCalls) != 2 || len(h.prov.Created) != 1 {
		t.Fatalf("%d calls, created %v after the compute was updated; want the node at once", len(h.prov.CreateCalls), h.prov.Created)
	}
	if errs := errorCodes(h.storedCompute(c)); errs["NodeProvisioningFailed"] != "" {
		t.Errorf("the compute still shows %q after the node was created", errs["NodeProvisioningFailed"])
	}

	// Unchanged, it is tried again after the longest backoff: the
	// provider's own settings (an image built, a namespace made) may
	// have been fixed meanwhile.
	d := h.compute("gpu", 0, 1, "PT120S")
	h.submit(d, 1)
	h.prov.NextCreateErr = provider.Configurationf("%s", words)
	h.pass()
	calls := len(h.prov.CreateCalls)
	h.clk.Step(maxBackoff - time.Second)
	h.pass()
	if len(h.prov.CreateCalls) != calls {
		t.Fatalf("tried again %s after a configuration error; want %s", maxBackoff-time.Second, maxBackoff)
	}
	h.clk.Step(time.Second)
	h.pass()
	if len(h.prov.CreateCalls) != calls+1 || len(h.prov.Created) != 2 {
		t.Fatalf("%d calls after %s; want one more, and the node", len(h.prov.CreateCalls)-calls, maxBackoff)
	}
	if got := failuresByReason(t, m); got[metrics.ReasonConfiguration] != 2 || len(got) != 1 {
		t.Errorf("provisioning failures by reason = %v; want configuration 2", got)
	}
}
