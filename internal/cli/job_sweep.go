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

// listTrials is 'job list --parent SWEEP': the sweep's trials with their
// parameters, status and the primary metric, the best marked.
func (g *globals) listTrials(ctx context.Context, c *client.Client, parent, status string) error {
	sw, err := c.GetJob(ctx, parent)
	if err != nil {
		return err
	}
	if !sw.IsSweep() {
		return fmt.Errorf("job %s is a %s job, not a sweep; it has no trials", parent, sw.Properties.JobType)
	}
	trials, err := c.ListTrials(ctx, parent)
	if err != nil {
		return err
	}
	if status != "" {
		trials = slices.DeleteFunc(trials, func(j api.Job) bool { return !strings.EqualFold(j.Properties.Status, status) })
	}
	views := make([]JobView, 0, len(trials))
	for _, t := range trials {
		views = append(views, jobFromARM(t, c.Server()))
	}
	return g.show("table", views, func() *table { return trialsTable(sw, trials) })
}

// trialsTable is a sweep's trials: name, status, each parameter, the
// primary metric's latest value, and * on the best.
func trialsTable(sw api.Job, trials []api.Job) *table {
	metric := ""
	if o := sw.Properties.Objective; o != nil {
		metric = o.PrimaryMetric
	}
	bestName := ""
	if st := sw.Properties.Sweep; st != nil && st.BestTrial != nil {
		bestName = st.BestTrial.Name
	}
	var names []string
	for k := range sw.Properties.SearchSpace {
		names = append(names, k)
	}
	slices.Sort(names)
	t := &table{header: append(append([]string{"NAME", "STATUS"}, upper(names)...), strings.ToUpper(metric), "BEST")}
	for _, j := range trials {
		row := []any{j.Name, j.Properties.Status}
		for _, n := range names {
			row = append(row, shortValue(j.Properties.Parameters[n]))
		}
		v := "-"
		if x, ok := j.Properties.Metrics[metric]; ok {
			v = strconv.FormatFloat(x, 'g', 6, 64)
		}
		mark := ""
		if j.Name == bestName {
			mark = "*"
		}
		t.add(append(row, v, mark)...)
	}
	return t
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}

// shortValue is a parameter as a table shows it: 6 significant digits.
func shortValue(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'g', 6, 64)
	}
	return sweep.Format(v)
}
