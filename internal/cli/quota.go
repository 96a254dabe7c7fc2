package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Quota names of the location-wide pools, as the server spells them.
const (
	quotaTotal       = "TotalDedicatedCores"
	quotaLowPriority = "TotalLowPriorityCores"
)

func newQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Show and change the core quotas of a location",
		Long: `Quotas limit the cores that the clusters of every workspace of the
subscription hold in a location: dedicated cores per VM family, total
dedicated cores, and one pool of low-priority cores for all families.
The autoscaler never creates nodes past them.`,
	}
	cmd.AddCommand(newQuotaListCmd(g), newQuotaUpdateCmd(g))
	return cmd
}

func newQuotaListCmd(g *globals) *cobra.Command {
	var loc string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the quotas of a location with the cores in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			quotas, err := c.ListQuotas(cmd.Context(), loc)
			if err != nil {
				return err
			}
			return g.show("table", quotas, func() *table {
				used := map[string]int64{}
				if usages, err := c.ListUsages(cmd.Context(), loc); err == nil {
					for _, u := range usages {
						used[u.Name.Value] = u.CurrentValue
					}
				}
				t := &table{header: []string{"QUOTA", "IN USE", "LIMIT", "DESCRIPTION"}}
				for _, q := range quotas {
					t.add(q.Name.Value, used[q.Name.Value], q.Limit, q.Name.LocalizedValue)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&loc, "location", "l", "", "location (default: the configured one)")
	return cmd
}

func newQuotaUpdateCmd(g *globals) *cobra.Command {
	var (
		loc, family        string
		total, lowPriority bool
		limit              int64
	)
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Set the core limit of a VM family, of all dedicated cores, or of low-priority cores",
		Example: `  cumulus quota update --location local --family standardDSv2Family --limit 64
  cumulus quota update --family Standard_NCSv3_Family_Cluster_Dedicated_vCPUs --limit 24
  cumulus quota update --total --limit 1000
  cumulus quota update --low-priority --limit 200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := cmd.Flags().Changed
			name, chosen := "", 0
			if set("family") {
				name, chosen = family, chosen+1
			}
			if total {
				name, chosen = quotaTotal, chosen+1
			}
			if lowPriority {
				name, chosen = quotaLowPriority, chosen+1
			}
			if chosen != 1 || name == "" {
				return fmt.Errorf("give exactly one of --family FAMILY, --total or --low-priority")
			}
			if limit < 0 {
				return fmt.Errorf("--limit must be 0 or more cores")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if loc == "" {
				loc = c.Location
			}
			if loc == "" {
				loc = "local"
			}
			id := "/subscriptions/" + c.Scope.Subscription + "/providers/" + api.Provider + "/locations/" + loc + "/quotas/" + name
			rows, err := c.UpdateQuotas(cmd.Context(), loc, api.QuotaUpdateRequest{Location: loc,
				Value: []api.QuotaUpdate{{ID: id, Limit: limit, Unit: "Count"}}})
			if err != nil {
				return err
			}
			if len(rows) != 1 {
				return fmt.Errorf("the server answered %d rows for one quota", len(rows))
			}
			if err := quotaStatusError(rows[0], name, loc); err != nil {
				return err
			}
			return g.show("table", rows, func() *table {
				t := &table{header: []string{"QUOTA", "LIMIT", "STATUS"}}
				for _, r := range rows {
					t.add(lastSegment(r.ID), r.Limit, r.Status)
				}
				return t
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&loc, "location", "l", "", "location (default: the configured one)")
	fl.StringVar(&family, "family", "", "VM family, as 'compute list-sizes' shows it (standardDSv2Family) or as Azure names its quota")
	fl.BoolVar(&total, "total", false, "the total dedicated cores of the location")
	fl.BoolVar(&lowPriority, "low-priority", false, "the low-priority cores of the location (one pool for all families)")
	fl.Int64Var(&limit, "limit", 0, "the new limit in cores")
	_ = cmd.MarkFlagRequired("limit")
	return cmd
}

// quotaStatusError turns a refused entry into an error that says why.
func quotaStatusError(r api.QuotaUpdate, name, loc string) error {
	switch r.Status {
	case api.QuotaStatusSuccess:
		return nil
	case api.QuotaStatusInvalidFamily:
		return &api.Error{Code: r.Status, Message: fmt.Sprintf("%q is not a VM family; 'cumulus compute list-sizes' shows the families", name)}
	case api.QuotaStatusBelowMinimum:
		return &api.Error{Code: r.Status, Message: fmt.Sprintf("limit %d for %s is below the cores that the minNodeCount of the clusters in location %s holds; lower their minNodeCount first", r.Limit, name, loc)}
	}
	return &api.Error{Code: r.Status, Message: fmt.Sprintf("the server refused limit %d for %s in location %s", r.Limit, name, loc)}
}

func lastSegment(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '/' {
			return id[i+1:]
		}
	}
	return id
}
