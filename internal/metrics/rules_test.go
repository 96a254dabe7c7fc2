package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rulesDir holds the shipped Prometheus alerting rules.
var rulesDir = filepath.Join("..", "..", "deploy", "prometheus")

// exposedNames lists the names of every family the exposition may hold.
func exposedNames(m *Metrics) map[string]bool {
	names := map[string]bool{}
	for _, n := range m.Names() {
		names[n] = true
	}
	return names
}

// The shipped alerting rules name only metrics Cumulus exposes (a renamed
// metric would leave an alert that never fires).
func TestAlertRulesNameExposedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(rulesDir, "cumulus-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names := exposedNames(New(Options{DB: openStore(t)}))
	used := regexp.MustCompile(`\bcumulus_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("the rules name no cumulus metric")
	}
	for _, n := range used {
		base := n
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if trimmed, ok := strings.CutSuffix(n, suffix); ok && names[trimmed] {
				base = trimmed
			}
		}
		if !names[base] {
			t.Errorf("the rules name %s, which Cumulus does not expose", n)
		}
	}
}

// The shipped alerting rules pass promtool's checks and their unit tests
// (cumulus-rules_test.yml).
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool (Debian package prometheus) is required in CI")
		}
		t.Skip("skipping: no promtool here (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "cumulus-rules.yml"}, {"test", "rules", "cumulus-rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
