package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// identityView is a user-assigned identity as 'az identity' prints it:
// the ARM resource with its properties flattened, and its resource group.
type identityView struct {
	ClientID      string            `json:"clientId"`
	ID            string            `json:"id"`
	Location      string            `json:"location"`
	Name          string            `json:"name"`
	PrincipalID   string            `json:"principalId"`
	ResourceGroup string            `json:"resourceGroup"`
	Tags          map[string]string `json:"tags"`
	TenantID      string            `json:"tenantId"`
	Type          string            `json:"type"`
}

func identityViewOf(u api.UserIdentity, group string) identityView {
	tags := u.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return identityView{ClientID: u.Properties.ClientID, ID: u.ID, Location: u.Location, Name: u.Name,
		PrincipalID: u.Properties.PrincipalID, ResourceGroup: group, Tags: tags, TenantID: u.Properties.TenantID, Type: u.Type}
}

func identityTable(views ...identityView) *table {
	t := &table{header: []string{"NAME", "RESOURCE GROUP", "LOCATION", "CLIENT ID", "PRINCIPAL ID"}}
	for _, v := range views {
		t.add(v.Name, v.ResourceGroup, v.Location, v.ClientID, v.PrincipalID)
	}
	return t
}

func newIdentityCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "identity",
		Short: "Manage user-assigned identities (like 'az identity'), which computes attach to get tokens as them",
		Long: `User-assigned identities (Microsoft.ManagedIdentity/userAssignedIdentities) live in a
resource group (-g, default the configured one). A compute attaches one by its id
('compute create --identity-type user_assigned --user-assigned-identities ID', or
'computetarget amlcompute identity assign'), and its jobs get tokens as its principal.`,
	}
	cmd.AddCommand(newIdentityCreateCmd(g), newIdentityShowCmd(g), newIdentityListCmd(g), newIdentityDeleteCmd(g))
	return cmd
}

// group is the resource group an identity command works in.
func (g *globals) group() (string, error) {
	cfg, _, err := g.settings()
	return cfg.ResourceGroup, err
}

func newIdentityCreateCmd(g *globals) *cobra.Command {
	var name, location string
	var tags []string
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create a user-assigned identity (or update the tags of one)",
		Example: "  cumulus identity create -n churn-reader --tags project=churn team=ml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := g.group()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			u := api.UserIdentity{Name: name, Location: location}
			if len(tags) > 0 {
				u.Tags = parseTags(tags)
			}
			out, err := c.PutUserIdentity(cmd.Context(), group, u)
			if err != nil {
				return err
			}
			v := identityViewOf(out, group)
			return g.show("json", v, func() *table { return identityTable(v) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the identity")
	cmd.Flags().StringVarP(&location, "location", "l", "", "location (default: the server's)")
	cmd.Flags().StringArrayVar(&tags, "tags", nil, "tags as key=value (several after one --tags, or repeated)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// identityName is the name given by --name or --ids (an identity's
// resource id, as az identity show --ids takes), with the group the id
// names.
func identityName(name, ids, group string) (string, string, error) {
	switch {
	case ids != "" && name != "":
		return "", "", fmt.Errorf("give --name or --ids, not both")
	case ids != "":
		p := strings.Split(strings.Trim(ids, "/"), "/")
		if len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
			!strings.EqualFold(p[5], api.ManagedIdentityProvider) || !strings.EqualFold(p[6], "userAssignedIdentities") {
			return "", "", fmt.Errorf("--ids %q is not an identity's resource id (/subscriptions/S/resourceGroups/G/providers/%s/NAME)", ids, api.TypeUserIdentity)
		}
		return p[7], p[3], nil
	case name == "":
		return "", "", fmt.Errorf("give --name (or --ids)")
	}
	return name, group, nil
}

func newIdentityShowCmd(g *globals) *cobra.Command {
	var name, ids string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a user-assigned identity: its resource id (what a compute attaches), client and principal ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := g.group()
			if err != nil {
				return err
			}
			if name, group, err = identityName(name, ids, group); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			u, err := c.GetUserIdentity(cmd.Context(), group, name)
			if err != nil {
				return err
			}
			v := identityViewOf(u, group)
			return g.show("json", v, func() *table { return identityTable(v) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the identity")
	cmd.Flags().StringVar(&ids, "ids", "", "the identity's resource id, instead of --name and -g")
	return cmd
}

func newIdentityListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the user-assigned identities of the resource group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := g.group()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			list, err := c.ListUserIdentities(cmd.Context(), group)
			if err != nil {
				return err
			}
			views := make([]identityView, 0, len(list))
			for _, u := range list {
				views = append(views, identityViewOf(u, group))
			}
			sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
			return g.show("table", views, func() *table { return identityTable(views...) })
		},
	}
}

func newIdentityDeleteCmd(g *globals) *cobra.Command {
	var name, ids string
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a user-assigned identity (computes that attach it keep the attachment, as in Azure, and get no tokens for it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := g.group()
			if err != nil {
				return err
			}
			if name, group, err = identityName(name, ids, group); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			existed, err := c.DeleteUserIdentity(cmd.Context(), group, name)
			if err != nil {
				return err
			}
			if !existed {
				return fmt.Errorf("identity %s does not exist in resource group %s", name, group)
			}
			fmt.Fprintf(g.stderr, "Deleted identity %s\n", name)
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the identity")
	cmd.Flags().StringVar(&ids, "ids", "", "the identity's resource id, instead of --name and -g")
	return cmd
}
