package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func newBudgetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Manage budgets: what a workspace, a compute or a tag may spend per month or week",
		Long: `A budget alerts at thresholds of its amount (default 50, 80 and 100 %): an
event in the history of each compute it covers, the cumulus_budget_* metrics,
and a POST to its webhook. At 100 % its action applies until the next period:
alert (nothing more), stop-scale-up (no new nodes: jobs queue naming the budget,
running jobs finish) or scale-to-min (also removes idle nodes above the minimum).
Budgets are judged from the cost ledger ('cumulus cost show') within seconds of a change, then every minute.`,
	}
	cmd.AddCommand(newBudgetCreateCmd(g), newBudgetShowCmd(g), newBudgetListCmd(g), newBudgetDeleteCmd(g))
	return cmd
}

func newBudgetCreateCmd(g *globals) *cobra.Command {
	var name, period, compute, tag, action, webhook string
	var amount float64
	var thresholds []float64
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create or replace a budget",
		Example: `  cumulus budget create -n vision --amount 500 --tag team=vision --action stop-scale-up
  cumulus budget create -n gpu-weekly --amount 2000 --period week --compute gpu-cluster --thresholds 80,100 --webhook https://hooks.example.com/cumulus`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := api.Budget{Name: name, Properties: api.BudgetProperties{Amount: amount, Period: period, Compute: compute,
				Thresholds: thresholds, Action: action, Webhook: webhook}}
			if tag != "" {
				k, v, ok := strings.Cut(tag, "=")
				if !ok || k == "" {
					return fmt.Errorf("--tag %q: want KEY=VALUE", tag)
				}
				b.Properties.Tag = &api.BudgetTag{Key: k, Value: v}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.PutBudget(cmd.Context(), b)
			if err != nil {
				return err
			}
			return g.show("json", out, func() *table { return budgetTable(out) })
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the budget")
	fl.Float64Var(&amount, "amount", 0, "what may be spent per period, in the server's currency")
	fl.StringVar(&period, "period", "month", "month (calendar, UTC) or week (from Monday, UTC)")
	fl.StringVar(&compute, "compute", "", "only this compute of the workspace")
	fl.StringVar(&tag, "tag", "", "only the computes with this tag, KEY=VALUE")
	fl.Float64SliceVar(&thresholds, "thresholds", nil, "percentages of the amount that alert; 50,80,100 when not given")
	fl.Lookup("thresholds").DefValue = "" // pflag would print "(default [])"
	fl.StringVar(&action, "action", "alert", "at 100 %: alert, stop-scale-up or scale-to-min")
	fl.StringVar(&webhook, "webhook", "", "URL a JSON notice is POSTed to at each threshold")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("amount")
	return cmd
}

func budgetTable(bs ...api.Budget) *table {
	t := &table{header: []string{"NAME", "SCOPE", "AMOUNT", "PERIOD", "SPENT", "ACTION", "IN FORCE"}}
	for _, b := range bs {
		p := b.Properties
		scope := "workspace"
		switch {
		case p.Compute != "":
			scope = "compute " + p.Compute
		case p.Tag != nil:
			scope = "tag " + p.Tag.Key + "=" + p.Tag.Value
		}
		spent, force := "-", "no"
		if st := p.Status; st != nil {
			spent = fmt.Sprintf("%s %s (%.0f%%)", money(st.Spent), st.Currency, st.Percent)
			if st.ActionActive {
				force = "yes"
			}
		}
		t.add(b.Name, scope, money(p.Amount), p.Period, spent, p.Action, force)
	}
	return t
}

func newBudgetShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a budget and what was spent this period",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			b, err := c.GetBudget(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.show("json", b, func() *table { return budgetTable(b) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the budget")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newBudgetListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspace's budgets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			bs, err := c.ListBudgets(cmd.Context())
			if err != nil {
				return err
			}
			return g.show("table", bs, func() *table { return budgetTable(bs...) })
		},
	}
}

func newBudgetDeleteCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a budget (its action stops at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteBudget(cmd.Context(), name); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "Deleted budget %s\n", name)
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the budget")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
