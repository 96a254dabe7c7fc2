package server_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// GET /metrics needs a signed-in principal whose roles read, at any
// scope: refused callers get ARM errors (401 with WWW-Authenticate, 403),
// readers get the exposition.
func TestMetricsNeedsAuthentication(t *testing.T) {
	h := newHarness(t, harnessOpts{metrics: true})
	h.create("cpu1", computeBody())

	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"no header", nil},
		{"unknown token", []string{"Authorization", "Bearer cml_not-a-real-token"}},
		{"basic scheme", []string{"Authorization", "Basic " + h.token}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.raw("GET", "/metrics", nil, tc.hdr...).want(t, 401, "AuthenticationFailed")
			if !strings.Contains(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
			}
			if bytes.Contains(r.Body, []byte("cumulus_compute_nodes")) {
				t.Errorf("a refused caller got the exposition: %s", r.Body)
			}
		})
	}

	noRole := h.user("norole", "", "")
	h.raw("GET", "/metrics", nil, "Authorization", "Bearer "+noRole).want(t, 403, "AuthorizationFailed")
	idOp := h.user("idop", "ManagedIdentityOperator", "/")
	h.raw("GET", "/metrics", nil, "Authorization", "Bearer "+idOp).want(t, 403, "AuthorizationFailed")

	reader := h.user("reader", "Reader", hWSPath)
	r := h.raw("GET", "/metrics", nil, "Authorization", "Bearer "+reader).want(t, 200)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`cumulus_compute_nodes{compute="cpu1",state="idle",workspace="ws1"} 0`,
		`cumulus_compute_max_nodes{compute="cpu1",workspace="ws1"} 2`,
		`cumulus_quota_limit_cores{family="total",location="westus2",priority="dedicated",subscription="sub1"} 1000`,
	} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	h.raw("POST", "/metrics", nil, "Authorization", "Bearer "+h.token).want(t, 405, "MethodNotAllowed")
}

// API request durations are labelled by route pattern and code, never by
// the path: two computes make one series.
func TestRequestDurationsByRoutePattern(t *testing.T) {
	h := newHarness(t, harnessOpts{metrics: true})
	h.do("GET", computePath("missing-1"), nil).want(t, 404)
	h.do("GET", computePath("missing-2"), nil).want(t, 404)
	h.raw("BREW", "/no/such/path", nil).want(t, 401) // before authentication: still bounded
	r := h.do("GET", "/metrics", nil).want(t, 200)
	families := parse(t, r.Body)
	mf := families["cumulus_api_request_duration_seconds"]
	if mf == nil {
		t.Fatalf("no cumulus_api_request_duration_seconds in\n%s", r.Body)
	}
	pattern := "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/{ws}/computes/{name}"
	found := false
	for _, m := range mf.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if strings.Contains(l["route"], "missing") || strings.Contains(l["route"], "/no/such") || l["method"] == "BREW" {
			t.Errorf("a series is labelled by the raw request: %v", l)
		}
		if l["route"] == pattern && l["method"] == "GET" && l["code"] == "404" {
			found = true
			if n := m.GetHistogram().GetSampleCount(); n != 2 {
				t.Errorf("GET %s 404: %d requests, want 2", pattern, n)
			}
		}
	}
	if !found {
		t.Errorf("no series for GET %s 404 in\n%s", pattern, r.Body)
	}
	if families["cumulus_store_transaction_seconds"] == nil {
		t.Errorf("no store transaction durations in\n%s", r.Body)
	}
}

// The whole exposition, as a scraper sees it, passes promtool's checks
// (names, units, help; lint problems are errors). promtool is in Debian's
// prometheus package, which CI installs (scripts/test-setup.sh).
func TestMetricsPassPromtool(t *testing.T) {
	promtool := needPromtool(t)
	h := newHarness(t, harnessOpts{metrics: true})
	h.create("cpu1", computeBody())
	h.do("GET", computePath("cpu1"), nil).want(t, 200)
	r := h.do("GET", "/metrics", nil).want(t, 200)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(r.Body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// needPromtool returns promtool's path; without it the test is skipped
// here and fails in CI.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool (Debian package prometheus) is required in CI")
		}
		t.Skip("skipping: no promtool here (apt-get install prometheus)")
	}
	return p
}

func parse(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse exposition: %v\n%s", err, body)
	}
	return mfs
}
