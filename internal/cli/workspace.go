package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func newWorkspaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Short: "Manage workspaces (like 'az ml workspace')"}
	cmd.AddCommand(newWorkspaceCreateCmd(g), newWorkspaceShowCmd(g), newWorkspaceListCmd(g), newWorkspaceDeleteCmd(g))
	return cmd
}

func workspaceTable(list []api.Workspace) *table {
	t := &table{header: []string{"NAME", "LOCATION", "DESCRIPTION", "STATE"}}
	for _, w := range list {
		t.add(w.Name, w.Location, w.Properties.Description, w.Properties.ProvisioningState)
	}
	return t
}

func newWorkspaceCreateCmd(g *globals) *cobra.Command {
	var name, location, description, display string
	var tags []string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create or update a workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			w := api.Workspace{Name: name, Location: location,
				Properties: api.WorkspaceProperties{Description: description, FriendlyName: display}}
			if len(tags) > 0 {
				w.Tags = parseTags(tags)
			}
			out, err := c.PutWorkspace(cmd.Context(), w)
			if err != nil {
				return err
			}
			return g.show("json", out, func() *table { return workspaceTable([]api.Workspace{out}) })
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "workspace name (3–33 characters: letters, digits, '_', '-')")
	fl.StringVarP(&location, "location", "l", "", "location (default: the server's)")
	fl.StringVar(&description, "description", "", "description")
	fl.StringVar(&display, "display-name", "", "display name")
	fl.StringArrayVar(&tags, "tags", nil, "tags as key=value")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newWorkspaceShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if name == "" {
				name = c.Scope.Workspace
			}
			w, err := c.GetWorkspace(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.show("json", w, func() *table { return workspaceTable([]api.Workspace{w}) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "workspace name (default: the configured one)")
	return cmd
}

func newWorkspaceListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspaces of the resource group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			list, err := c.ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			return g.show("table", list, func() *table { return workspaceTable(list) })
		},
	}
}

func newWorkspaceDeleteCmd(g *globals) *cobra.Command {
	var name string
	var yes, force, noWait bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a workspace (refused while it holds computes, unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				ok, err := confirm(g, fmt.Sprintf("Delete workspace %s?", name))
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("not deleted")
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			resp, err := c.DeleteWorkspace(cmd.Context(), name, force)
			if err != nil {
				return err
			}
			if resp.Status == 204 {
				return fmt.Errorf("workspace %s does not exist", name)
			}
			if noWait {
				return nil
			}
			return waitWithProgress(cmd.Context(), g, c, resp, "Deleting workspace "+name)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "workspace name")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&force, "force", false, "also delete every compute of the workspace")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the operation to finish")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
