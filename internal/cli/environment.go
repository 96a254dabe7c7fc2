package cli

import (
	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func newEnvironmentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "environment", Short: "Manage job environments (like 'az ml environment'): a name, a version and an image"}
	cmd.AddCommand(newEnvironmentCreateCmd(g), newEnvironmentShowCmd(g), newEnvironmentListCmd(g))
	return cmd
}

func envTable(list []api.Environment) *table {
	t := &table{header: []string{"VERSION", "IMAGE", "DESCRIPTION"}}
	for _, e := range list {
		t.add(e.Name, e.Properties.Image, e.Properties.Description)
	}
	return t
}

func newEnvironmentCreateCmd(g *globals) *cobra.Command {
	var name, version, image, description string
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create an environment version; jobs name it as azureml:<name>:<version> or azureml:<name>@latest",
		Example: "  cumulus environment create --name my-env --version 1 --image python:3.11",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.PutEnvironment(cmd.Context(), name, version, api.Environment{Properties: api.EnvironmentProperties{Image: image, Description: description}})
			if err != nil {
				return err
			}
			return g.show("json", out, func() *table { return envTable([]api.Environment{out}) })
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "environment name")
	fl.StringVarP(&version, "version", "v", "1", "version")
	fl.StringVar(&image, "image", "", "container image jobs of this environment run in")
	fl.StringVar(&description, "description", "", "description")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("image")
	return cmd
}

func newEnvironmentShowCmd(g *globals) *cobra.Command {
	var name, version string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show an environment version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			e, err := c.GetEnvironment(cmd.Context(), name, version)
			if err != nil {
				return err
			}
			return g.show("json", e, func() *table { return envTable([]api.Environment{e}) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "environment name")
	cmd.Flags().StringVarP(&version, "version", "v", "1", "version")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newEnvironmentListCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's environments, or with --name the versions of one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if name == "" {
				envs, err := c.ListEnvironments(cmd.Context())
				if err != nil {
					return err
				}
				return g.show("table", envs, func() *table {
					t := &table{header: []string{"NAME", "LATEST VERSION", "IMAGE", "VERSIONS"}}
					for _, e := range envs {
						t.add(e.Name, e.Properties.LatestVersion, e.Properties.LatestImage, e.Properties.Versions)
					}
					return t
				})
			}
			list, err := c.ListEnvironmentVersions(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.show("table", list, func() *table { return envTable(list) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "environment name (default: list every environment)")
	return cmd
}
