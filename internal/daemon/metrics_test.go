package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The daemon serves the metrics on the API listener to a signed-in
// reader only, and without authentication on its loopback metrics
// listener; both expose the store's gauges and the API's own requests.
func TestDaemonServesMetrics(t *testing.T) {
	o := options(t, t.TempDir())
	o.MetricsListen = "127.0.0.1:0"
	d := start(t, o)
	defer stop(t, d)
	if !strings.HasPrefix(d.MetricsURL, "http://127.0.0.1:") {
		t.Fatalf("MetricsURL = %q", d.MetricsURL)
	}
	c := caller{t: t, base: d.URL, token: d.Token, http: http.DefaultClient}
	if code, _, body := c.do("PUT", dWSPath+"/computes/cpu1", `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"Standard_DS3_v2","scaleSettings":{"minNodeCount":0,"maxNodeCount":3}}}}`); code/100 != 2 {
		t.Fatalf("PUT compute: %d %s", code, body)
	}

	res, err := http.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", res.StatusCode)
	}
	code, _, api := c.do("GET", "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics as admin: %d %s", code, api)
	}

	res, err = http.Get(d.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	loopback, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d %v", d.MetricsURL, res.StatusCode, err)
	}
	for _, body := range [][]byte{api, loopback} {
		for _, want := range []string{
			`cumulus_compute_max_nodes{compute="cpu1",workspace="ws1"} 3`,
			`cumulus_api_request_duration_seconds_count{code="201",method="PUT",route="/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/{ws}/computes/{name}"}`,
			`cumulus_store_transaction_seconds_count{outcome="committed"}`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the exposition lacks %s", want)
			}
		}
	}
}
