package cli

import (
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
)

func newCostCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cost", Short: "What compute clusters, jobs, workspaces and tags cost"}
	cmd.AddCommand(newCostShowCmd(g))
	return cmd
}

func newCostShowCmd(g *globals) *cobra.Command {
	var by, since, until string
	var group bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the cost of a period: billed node-hours (request to removal) × the hourly price, busy (a job held the node) and idle",
		Example: `  cumulus cost show                                  # this month, by compute, in the current workspace
  cumulus cost show --by job --since 7d
  cumulus cost show --by tag:team --since 2024-05-01T00:00:00Z --until 2024-06-01T00:00:00Z -o csv
  cumulus cost show --by workspace --resource-group-wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := cost.ParseBy(by); err != nil {
				return fmt.Errorf("--%w", err)
			}
			format := g.output
			if format != "csv" {
				if _, err := g.format("table"); err != nil {
					return fmt.Errorf("--output %q is not one of %s, csv", g.output, strings.Join(outputFormats, ", "))
				}
			}
			now := time.Now()
			s, err := parseWhen("--since", since, now)
			if err != nil {
				return err
			}
			u, err := parseWhen("--until", until, now)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.Costs(cmd.Context(), by, s, u, group)
			if err != nil {
				return err
			}
			if format == "csv" {
				return writeCostCSV(g, r)
			}
			return g.show("table", r, func() *table { return costTable(r) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&by, "by", cost.ByCompute, "group by compute, job, workspace or tag:KEY (a job's tag, else its compute's)")
	fl.StringVar(&since, "since", "", "from a time: a duration back from now (36h, 7d) or an RFC 3339 time (default: the start of this month, UTC)")
	fl.StringVar(&until, "until", "", "to a time, like --since (default: now)")
	fl.BoolVar(&group, "resource-group-wide", false, "every workspace of the resource group, not only the current one")
	return cmd
}

func costTable(r api.CostReport) *table {
	t := &table{header: []string{"KEY", "COMPUTE", "NODE-HOURS", "BUSY", "IDLE", "COST (" + r.Currency + ")"}}
	hours := func(h float64) string { return strconv.FormatFloat(h, 'f', 2, 64) }
	for _, x := range r.Rows {
		comp := x.Compute
		if comp == "" {
			comp = "-"
		}
		t.add(x.Key, comp, hours(x.NodeHours), hours(x.BusyNodeHours), hours(x.IdleNodeHours), money(x.Cost))
	}
	t.add("total", "", hours(r.Total.NodeHours), hours(r.Total.BusyNodeHours), hours(r.Total.IdleNodeHours), money(r.Total.Cost))
	return t
}

// money prints an amount in cents, or, when it is less than a cent but not
// nothing (a short job on a small size), with two significant digits: a
// cost of 0.000557 is 0.00056, not 0.00.
func money(v float64) string {
	if a := math.Abs(v); a > 0 && a < 0.005 {
		digits := min(1-int(math.Floor(math.Log10(a))), 10)
		return strconv.FormatFloat(v, 'f', digits, 64)
	}
	return strconv.FormatFloat(cost.Cents(v), 'f', 2, 64)
}

// writeCostCSV prints the rows with a header, for spreadsheets.
func writeCostCSV(g *globals, r api.CostReport) error {
	w := csv.NewWriter(g.stdout)
	_ = w.Write([]string{"key", "workspace", "compute", "node_hours", "busy_node_hours", "idle_node_hours", "cost", "currency", "since", "until"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	for _, x := range r.Rows {
		_ = w.Write([]string{x.Key, x.Workspace, x.Compute, f(x.NodeHours), f(x.BusyNodeHours), f(x.IdleNodeHours), f(x.Cost), r.Currency,
			r.Since.Format(time.RFC3339), r.Until.Format(time.RFC3339)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}
