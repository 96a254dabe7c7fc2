// Package cli is the `cumulus` command line: the server, the agent, and the
// client commands that mirror `az ml compute` / `az ml job`.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
)

// globals are the flags every client command shares.
type globals struct {
	configPath    string
	server        string
	token         string
	subscription  string
	resourceGroup string
	workspace     string
	output        string
	stdout        io.Writer
	stderr        io.Writer
}

// Main runs the CLI with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", oneLine(err))
		return 1
	}
	return 0
}

// oneLine renders an error as one line: an API error as "Code: message".
func oneLine(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		msg := e.Code + ": " + e.Message
		for _, d := range e.Details {
			if d.Target != "" && !strings.Contains(msg, d.Message) {
				msg += "; " + d.Target + ": " + d.Message
			}
		}
		return strings.ReplaceAll(msg, "\n", " ")
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// NewRoot builds the command tree.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "cumulus",
		Short:         "Elastic compute clusters for ML jobs, compatible with Azure ML compute clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "CLI config file (env CUMULUS_CONFIG; default ~/.cumulus/config.yaml)")
	pf.StringVar(&g.server, "server", "", "server URL, or several replicas' URLs comma-separated (env CUMULUS_SERVER; default from the config file)")
	pf.StringVar(&g.subscription, "subscription", "", "subscription id (env CUMULUS_SUBSCRIPTION; default from the config file)")
	pf.StringVarP(&g.resourceGroup, "resource-group", "g", "", "resource group (env CUMULUS_RESOURCE_GROUP; default from the config file)")
	pf.StringVarP(&g.workspace, "workspace-name", "w", "", "workspace (env CUMULUS_WORKSPACE; default from the config file)")
	pf.StringVarP(&g.output, "output", "o", "", "output format: table, json or yaml")
	root.AddCommand(newServeCmd(g), newAgentCmd(g), newComputeCmd(g), newJobCmd(g), newWorkspaceCmd(g), newQuotaCmd(g), newEnvironmentCmd(g), newNodeImageCmd(g), newUICmd(g), newSimCmd(g), newAuthCmd(g), newAuditCmd(g), newStoreCmd(g), newCostCmd(g), newBudgetCmd(g), newLockCmd(g), newApplyCmd(g), newSDKCmd(g), newVersionCmd(g))
	return root
}

// client builds an API client from the config file, environment and flags
// (in rising order of precedence).
func (g *globals) client() (*client.Client, error) {
	cfg, _, err := g.settings()
	if err != nil {
		return nil, err
	}
	return client.New(cfg)
}

// settings merges the config file, environment and flags (in rising order
// of precedence) and names the config file read.
func (g *globals) settings() (config.CLI, string, error) {
	path := g.configPath
	if path == "" {
		path = config.Path()
	}
	cfg, err := config.Load(path)
	if err != nil && !config.IsMissing(err) {
		return cfg, path, err
	}
	pick := func(dst *string, env, flag string) {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
		if flag != "" {
			*dst = flag
		}
	}
	pick(&cfg.Server, "CUMULUS_SERVER", g.server)
	pick(&cfg.Token, "CUMULUS_TOKEN", g.token)
	pick(&cfg.Subscription, "CUMULUS_SUBSCRIPTION", g.subscription)
	pick(&cfg.ResourceGroup, "CUMULUS_RESOURCE_GROUP", g.resourceGroup)
	pick(&cfg.Workspace, "CUMULUS_WORKSPACE", g.workspace)
	if cfg.Server == "" && config.IsMissing(err) {
		return cfg, path, fmt.Errorf("no CLI config at %s: start the server once with 'cumulus serve' (it writes that file), or pass --server and set CUMULUS_TOKEN", path)
	}
	if cfg.Subscription == "" {
		cfg.Subscription = "local"
	}
	if cfg.ResourceGroup == "" {
		cfg.ResourceGroup = "local"
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "default"
	}
	return cfg, path, nil
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of cumulus and the API version it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "cumulus %s (api-version %s)\n", Version, client.APIVersion)
			return nil
		},
	}
}

// Version is set at build time with -ldflags "-X …/cli.Version=…".
var Version = "dev"
