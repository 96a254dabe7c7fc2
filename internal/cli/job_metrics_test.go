package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func TestMetricsTable(t *testing.T) {
	now := time.Unix(0, 0)
	v := func(value float64, step int64, at time.Time) api.MetricValue {
		return api.MetricValue{Name: "acc", Value: value, Step: step, Timestamp: at}
	}
	h := []api.MetricValue{v(0.1, 0, now), v(0.5, 1, now), v(0.4, 1, now.Add(time.Second)), v(0.9, 2, now)}
	m := api.JobMetrics{Latest: []api.MetricValue{h[3]}, History: map[string][]api.MetricValue{"acc": h}}
	var b strings.Builder
	if err := metricsTable(m).print(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "acc     0.9     2     4       ▁▃█") {
		t.Errorf("table:\n%s", got)
	}
	if got := sparkline([]float64{1, 1, 3, 3}, 2); got != "▁█" {
		t.Errorf("bucketed sparkline %q", got)
	}
}
