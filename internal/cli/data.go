package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Data assets and datastores, like 'az ml data' and 'az ml datastore'.

func newDataCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "data", Short: "Manage data assets (like 'az ml data'): a name and version for a file or folder in a datastore"}
	cmd.AddCommand(newDataCreateCmd(g), newDataShowCmd(g), newDataListCmd(g))
	return cmd
}

func newDatastoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "datastore", Short: "List and show datastores (like 'az ml datastore'): containers of the workspace's blob store"}
	cmd.AddCommand(newDatastoreListCmd(g), newDatastoreShowCmd(g))
	return cmd
}

// dataSpec is a data asset's YAML, as az ml data create reads it.
type dataSpec struct {
	Schema      string            `yaml:"$schema"`
	Name        string            `yaml:"name"`
	Version     string            `yaml:"version"`
	Type        string            `yaml:"type"`
	Path        string            `yaml:"path"`
	Description string            `yaml:"description"`
	Tags        map[string]string `yaml:"tags"`
	Datastore   string            `yaml:"datastore"`
}

func dataTable(list []api.DataVersion) *table {
	t := &table{header: []string{"VERSION", "TYPE", "PATH", "DESCRIPTION"}}
	for _, d := range list {
		t.add(d.Name, d.Properties.DataType, d.Properties.DataURI, d.Properties.Description)
	}
	return t
}

func newDataCreateCmd(g *globals) *cobra.Command {
	var file string
	var spec dataSpec
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a data asset version; a local path is uploaded to the datastore first",
		Long: `Create a data asset version from a file or folder: a local path is uploaded
to the datastore (workspaceblobstore by default) under LocalUpload/<hash>/,
as azure-ai-ml uploads it; an azureml://datastores/<ds>/paths/<path> is
registered as it is. Jobs name the asset as azureml:<name>:<version> or
azureml:<name>@latest. Without --version, the version after the latest.`,
		Example: "  cumulus data create --name numbers --path ./numbers --type uri_folder\n  cumulus data create -f data.yml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base := "."
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				var fromFile dataSpec
				if err := yaml.Unmarshal(b, &fromFile); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				base = filepath.Dir(file)
				mergeDataSpec(&fromFile, spec, cmd)
				spec = fromFile
			}
			if spec.Name == "" || spec.Path == "" {
				return fmt.Errorf("a data asset needs a name and a path (--name, --path or name:, path: in --file)")
			}
			if spec.Type == "" {
				spec.Type = api.DataURIFolder
			}
			if spec.Datastore == "" {
				spec.Datastore = api.DefaultDatastore
			}
			spec.Datastore = strings.TrimPrefix(spec.Datastore, "azureml:")
			c, err := g.client()
			if err != nil {
				return err
			}
			uri := spec.Path
			if !strings.Contains(uri, "://") {
				local := uri
				if !filepath.IsAbs(local) {
					local = filepath.Join(base, local)
				}
				st, err := os.Stat(local)
				if err != nil {
					return err
				}
				if st.IsDir() != (spec.Type == api.DataURIFolder) {
					return fmt.Errorf("path %s is a %s but type is %s", spec.Path, map[bool]string{true: "folder", false: "file"}[st.IsDir()], spec.Type)
				}
				if uri, err = c.UploadToDatastore(cmd.Context(), spec.Datastore, local); err != nil {
					return err
				}
			}
			if spec.Version == "" {
				spec.Version = "1"
				if a, err := c.GetDataAsset(cmd.Context(), spec.Name); err == nil {
					spec.Version = a.Properties.NextVersion
				}
			}
			out, err := c.PutDataVersion(cmd.Context(), spec.Name, spec.Version, api.DataVersion{Properties: api.DataVersionProperties{
				DataType: spec.Type, DataURI: uri, Description: spec.Description, Tags: spec.Tags}})
			if err != nil {
				return err
			}
			return g.show("json", out, func() *table { return dataTable([]api.DataVersion{out}) })
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "data asset YAML (name, version, type, path, description, tags)")
	fl.StringVarP(&spec.Name, "name", "n", "", "data asset name")
	fl.StringVarP(&spec.Version, "version", "v", "", "version (default: the next one)")
	fl.StringVarP(&spec.Type, "type", "t", "", "uri_folder (default) or uri_file")
	fl.StringVarP(&spec.Path, "path", "p", "", "a local file or folder, or azureml://datastores/<ds>/paths/<path>")
	fl.StringVar(&spec.Description, "description", "", "description")
	fl.StringVar(&spec.Datastore, "datastore", "", "datastore a local path is uploaded to (default workspaceblobstore)")
	return cmd
}

// mergeDataSpec lets flags given on the command line win over the file.
func mergeDataSpec(into *dataSpec, flags dataSpec, cmd *cobra.Command) {
	set := func(flag string, dst *string, v string) {
		if cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	set("name", &into.Name, flags.Name)
	set("version", &into.Version, flags.Version)
	set("type", &into.Type, flags.Type)
	set("path", &into.Path, flags.Path)
	set("description", &into.Description, flags.Description)
	set("datastore", &into.Datastore, flags.Datastore)
}

func newDataShowCmd(g *globals) *cobra.Command {
	var name, version, label string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a data asset version (--label latest: the newest)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if version == "" {
				if label != "" && label != "latest" {
					return fmt.Errorf("--label %q: the only label is latest", label)
				}
				a, err := c.GetDataAsset(cmd.Context(), name)
				if err != nil {
					return err
				}
				version = a.Properties.LatestVersion
			}
			d, err := c.GetDataVersion(cmd.Context(), name, version)
			if err != nil {
				return err
			}
			return g.show("json", d, func() *table { return dataTable([]api.DataVersion{d}) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "data asset name")
	cmd.Flags().StringVarP(&version, "version", "v", "", "version (default: --label latest)")
	cmd.Flags().StringVarP(&label, "label", "l", "", "latest")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newDataListCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's data assets, or with --name the versions of one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if name == "" {
				list, err := c.ListDataAssets(cmd.Context())
				if err != nil {
					return err
				}
				return g.show("table", list, func() *table {
					t := &table{header: []string{"NAME", "LATEST VERSION", "TYPE", "VERSIONS", "DESCRIPTION"}}
					for _, a := range list {
						t.add(a.Name, a.Properties.LatestVersion, a.Properties.DataType, a.Properties.Versions, a.Properties.Description)
					}
					return t
				})
			}
			list, err := c.ListDataVersions(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.show("table", list, func() *table { return dataTable(list) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "data asset name (default: list every data asset)")
	return cmd
}

func datastoreTable(list []api.Datastore) *table {
	t := &table{header: []string{"NAME", "TYPE", "ACCOUNT", "CONTAINER", "DEFAULT"}}
	for _, d := range list {
		t.add(d.Name, d.Properties.DatastoreType, d.Properties.AccountName, d.Properties.ContainerName, d.Properties.IsDefault)
	}
	return t
}

func newDatastoreListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspace's datastores",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			list, err := c.ListDatastores(cmd.Context())
			if err != nil {
				return err
			}
			return g.show("table", list, func() *table { return datastoreTable(list) })
		},
	}
}

func newDatastoreShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a datastore (its SAS is never shown: the SDKs ask for one with listSecrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			d, err := c.GetDatastore(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.show("json", d, func() *table { return datastoreTable([]api.Datastore{d}) })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "datastore name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
