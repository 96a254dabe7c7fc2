package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dashboardPath is the shipped Grafana dashboard.
var dashboardPath = filepath.Join("..", "..", "deploy", "grafana", "cumulus-dashboard.json")

// dashboardQueries reads the dashboard's PromQL queries (panels and
// template variables), with Grafana's variables replaced by what they
// stand for, so that Prometheus's own parser can check them.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	sub := strings.NewReplacer("$__rate_interval", "5m", "$workspace", ".*", "$compute", ".*")
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, sub.Replace(tg.Expr))
		}
	}
	return out
}

// The dashboard's queries name only metrics Cumulus exposes.
func TestDashboardNamesExposedMetrics(t *testing.T) {
	names := exposedNames(New(Options{DB: openStore(t)})) // the utilization families included
	name := regexp.MustCompile(`\bcumulus_[a-z_]+`)
	for _, q := range dashboardQueries(t) {
		used := name.FindAllString(q, -1)
		if len(used) == 0 {
			t.Errorf("query %q names no cumulus metric", q)
		}
		for _, n := range used {
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if trimmed, ok := strings.CutSuffix(n, suffix); ok && names[trimmed] {
					base = trimmed
				}
			}
			if !names[base] {
				t.Errorf("the dashboard queries %s, which Cumulus does not expose", n)
			}
		}
	}
}

// The dashboard's queries are valid PromQL: promtool parses them as
// recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool (Debian package prometheus) is required in CI")
		}
		t.Skip("skipping: no promtool here (apt-get install prometheus)")
	}
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	for i, q := range dashboardQueries(t) {
		qj, _ := json.Marshal(q) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "  - record: dashboard:query%d\n    expr: %s\n", i, qj)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
