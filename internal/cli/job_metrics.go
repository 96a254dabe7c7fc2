package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/sweep"
)

// showJobWithMetrics is 'job show': the job (its JSON holds the latest
// value of each metric in properties.metrics); in table format, then each
// metric's latest value and a chart of its values over steps.
func (g *globals) showJobWithMetrics(ctx context.Context, c *client.Client, j api.Job) error {
	if err := g.showJob(c, j); err != nil {
		return err
	}
	f, _ := g.format("json")
	if f == "table" && j.IsPipeline() {
		fmt.Fprintln(g.stdout)
		if err := stepsTable(j).print(g.stdout); err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "\n'cumulus job list --parent %s' lists the steps' jobs; 'cumulus job stream -n %s' follows their logs\n", j.Name, j.Name)
	}
	if f == "table" && j.IsParallel() && j.Properties.ParallelSpec != nil {
		st := j.Properties.Parallel
		fmt.Fprintf(g.stdout, "\n%s\n", parallelLine(st))
		if st != nil && len(st.Failures) > 0 {
			fmt.Fprintln(g.stdout, "\nFailed mini-batches:")
			if err := failuresTable(st).print(g.stdout); err != nil {
				return err
			}
		}
	}
	if f == "table" && j.IsSweep() {
		if st := j.Properties.Sweep; st != nil && st.BestTrial != nil {
			b := st.BestTrial
			var ps []string
			for k, v := range b.Parameters {
				ps = append(ps, k+"="+sweep.Format(v))
			}
			slices.Sort(ps)
			fmt.Fprintf(g.stdout, "\nBest trial: %s, %s %g (%s); 'cumulus job list --parent %s' lists the trials\n", b.Name, b.Metric, b.Value, strings.Join(ps, " "), j.Name)
		}
	}
	if f != "table" || len(j.Properties.Metrics) == 0 {
		return nil
	}
	m, err := c.JobMetrics(ctx, j.Name)
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout)
	return metricsTable(m).print(g.stdout)
}

// metricsTable is a job's metrics: each one's latest value and step, how
// many values were logged, and a chart over steps.
func metricsTable(m api.JobMetrics) *table {
	t := &table{header: []string{"METRIC", "LATEST", "STEP", "VALUES", "CHART (by step)"}}
	for _, l := range m.Latest {
		h := m.History[l.Name]
		t.add(l.Name, strconv.FormatFloat(l.Value, 'g', 6, 64), l.Step, len(h), sparkline(byStep(h), 40))
	}
	return t
}

// byStep is the last value logged at each step, in step order (history
// comes sorted by step, then time).
func byStep(h []api.MetricValue) []float64 {
	var out []float64
	for i, v := range h {
		if i+1 < len(h) && h[i+1].Step == v.Step {
			continue
		}
		out = append(out, v.Value)
	}
	return out
}

// sparkline draws values as a line of block characters, at most width
// wide (values averaged into buckets when there are more).
func sparkline(vs []float64, width int) string {
	if len(vs) == 0 {
		return ""
	}
	if len(vs) > width {
		b := make([]float64, width)
		for i := range b {
			lo, hi := i*len(vs)/width, (i+1)*len(vs)/width
			sum := 0.0
			for _, v := range vs[lo:hi] {
				sum += v
			}
			b[i] = sum / float64(hi-lo)
		}
		vs = b
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	const bars = "▁▂▃▄▅▆▇█"
	levels := []rune(bars)
	var s strings.Builder
	for _, v := range vs {
		i := len(levels) / 2
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(levels)-1))
		}
		s.WriteRune(levels[i])
	}
	return s.String()
}
