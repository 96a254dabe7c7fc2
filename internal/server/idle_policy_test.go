package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The idle policy extension over HTTP: set by PUT (any case, canonical on
// the way back), kept by GET, changed by PATCH next to or without the
// scale settings, and dropped by a PUT that leaves it out.
func TestComputeIdlePolicy(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	withPolicy := func(p map[string]any) func(map[string]any) {
		return func(m map[string]any) { inner(m)["idlePolicy"] = p }
	}
	c := h.create("adaptive", computeBody(withPolicy(map[string]any{"kind": "adaptive"})))
	if p := c.Aml().IdlePolicy; p == nil || p.Kind != "Adaptive" || p.DelayWeight == nil || *p.DelayWeight != api.DefaultDelayWeight {
		t.Fatalf("idle policy after PUT %+v; want Adaptive with delay weight %v", p, api.DefaultDelayWeight)
	}
	r := h.do("GET", computePath("adaptive"), nil).want(t, 200)
	if !strings.Contains(string(r.Body), `"idlePolicy":{"kind":"Adaptive","delayWeight":3.25}`) {
		t.Errorf("GET body %s; want the idle policy in properties.properties", r.Body)
	}

	h.do("PATCH", computePath("adaptive"), `{"properties":{"properties":{"idlePolicy":{"kind":"Adaptive","delayWeight":1.5}}}}`).want(t, 200)
	got := h.do("GET", computePath("adaptive"), nil).want(t, 200).compute(t)
	if w, ok := got.AdaptiveIdle(); !ok || w != 1.5 || *got.Aml().ScaleSettings.MaxNodeCount != 2 {
		t.Errorf("after PATCH: policy %+v, scale %+v", got.Aml().IdlePolicy, got.Aml().ScaleSettings)
	}
	h.do("PATCH", computePath("adaptive"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3},"idlePolicy":{"kind":"fixed"}}}}`).want(t, 200)
	got = h.do("GET", computePath("adaptive"), nil).want(t, 200).compute(t)
	if p := got.Aml().IdlePolicy; p == nil || p.Kind != "Fixed" || *got.Aml().ScaleSettings.MaxNodeCount != 3 {
		t.Errorf("after PATCH to Fixed: policy %+v, scale %+v", p, got.Aml().ScaleSettings)
	}

	for name, body := range map[string]string{
		"bad kind":          `{"properties":{"properties":{"idlePolicy":{"kind":"Smart"}}}}`,
		"no kind":           `{"properties":{"properties":{"idlePolicy":{"delayWeight":2}}}}`,
		"weight with Fixed": `{"properties":{"properties":{"idlePolicy":{"kind":"Fixed","delayWeight":2}}}}`,
		"negative weight":   `{"properties":{"properties":{"idlePolicy":{"kind":"Adaptive","delayWeight":-1}}}}`,
		"huge weight":       `{"properties":{"properties":{"idlePolicy":{"kind":"Adaptive","delayWeight":1e6}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var e api.ErrorResponse
			h.do("PATCH", computePath("adaptive"), body).want(t, 400, "ValidationError").json(t, &e)
			if !strings.Contains(e.Error.Target, "idlePolicy") {
				t.Errorf("error target %q; want it to point at the idle policy", e.Error.Target)
			}
		})
	}
	h.do("PATCH", computePath("adaptive"), `{"properties":{"properties":{"idlePolicy":{"kind":"Adaptive","delayWeight":"high"}}}}`).want(t, 400, "InvalidRequestContent")
	h.do("PUT", computePath("bad-policy"), computeBody(withPolicy(map[string]any{"kind": "Adaptive", "delayWeight": 1001}))).want(t, 400, "ValidationError")

	// A PUT without the extension is Azure's fixed timeout again.
	h.do("PUT", computePath("adaptive"), computeBody()).want(t, 200)
	if r := h.do("GET", computePath("adaptive"), nil).want(t, 200); strings.Contains(string(r.Body), "idlePolicy") {
		t.Errorf("GET body %s; want no idle policy after a PUT without one", r.Body)
	}
}
