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
	"github.com/spf13/pflag"

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
	queryExpr     string
	stdout        io.Writer
	stderr        io.Writer
}

// Main runs the CLI with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args = spreadValues(args)
	root := newRoot(stdout, stderr, args)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", oneLine(err))
		return 1
	}
	return 0
}

// listFlags take several KEY=VALUE words after one flag, as az's do
// ("--tags project=churn team=ml").
var listFlags = map[string]bool{"--tags": true, "--set": true}

// spreadValues rewrites the KEY=VALUE words that follow a list flag's
// value into repetitions of the flag ("--tags a=b c=d" becomes "--tags a=b
// --tags c=d"), which cobra reads. Nothing after "--" changes.
func spreadValues(args []string) []string {
	out := make([]string, 0, len(args))
	flag := "" // the list flag whose values run on
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if flag != "" && !strings.HasPrefix(a, "-") && strings.Contains(a, "=") {
			out = append(out, flag, a)
			continue
		}
		flag = ""
		out = append(out, a)
		name, _, inline := strings.Cut(a, "=")
		if !listFlags[name] {
			continue
		}
		flag = name
		if !inline && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
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
		return yamlWords(strings.ReplaceAll(msg, "\n", " "))
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// commands are the top-level commands, each with the name it answers to.
var commands = []struct {
	name string
	make func(*globals) *cobra.Command
}{
	{"serve", newServeCmd}, {"agent", newAgentCmd}, {"compute", newComputeCmd}, {"computetarget", newComputeTargetCmd},
	{"identity", newIdentityCmd}, {"job", newJobCmd}, {"workspace", newWorkspaceCmd}, {"quota", newQuotaCmd},
	{"environment", newEnvironmentCmd}, {"data", newDataCmd}, {"datastore", newDatastoreCmd}, {"node-image", newNodeImageCmd},
	{"ui", newUICmd}, {"sim", newSimCmd}, {"queue", newQueueCmd}, {"auth", newAuthCmd}, {"audit", newAuditCmd}, {"store", newStoreCmd},
	{"cost", newCostCmd}, {"budget", newBudgetCmd}, {"lock", newLockCmd}, {"apply", newApplyCmd}, {"sdk", newSDKCmd},
	{"version", newVersionCmd},
}

// NewRoot builds the command tree.
func NewRoot(stdout, stderr io.Writer) *cobra.Command { return newRoot(stdout, stderr, nil) }

// newRoot builds the tree a run of args needs: when args name a top-level
// command first, that command alone (its flags and subcommands are all
// cobra looks at; a job create then builds no other command's flags), else
// every command, for the help, the suggestions and the completions that
// list them.
func newRoot(stdout, stderr io.Writer, args []string) *cobra.Command {
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
	pf.StringVar(&g.configPath, "config", "", "CLI config file (env CUMULUS_CONFIG; default <data dir>/config.yaml, the data dir being $CUMULUS_DATA_DIR or ~/.cumulus)")
	pf.StringVar(&g.server, "server", "", "server URL, or several replicas' URLs comma-separated (env CUMULUS_SERVER; default from the config file)")
	pf.StringVar(&g.subscription, "subscription", "", "subscription id (env CUMULUS_SUBSCRIPTION; default from the config file)")
	pf.StringVarP(&g.resourceGroup, "resource-group", "g", "", "resource group (env CUMULUS_RESOURCE_GROUP; default from the config file)")
	pf.StringVarP(&g.workspace, "workspace-name", "w", "", "workspace (env CUMULUS_WORKSPACE; default from the config file)")
	pf.StringVarP(&g.output, "output", "o", "", "output format: table, json, jsonc (colored), yaml, tsv or none (lists default to table, single resources to json)")
	pf.StringVar(&g.queryExpr, "query", "", "JMESPath query applied to what -o json prints, as az's --query (e.g. \"[?status=='Running'].name\")")
	only := ""
	if len(args) > 0 {
		only = args[0]
	}
	named := false
	for _, c := range commands {
		if c.name == only {
			root.AddCommand(c.make(g))
			named = true
		}
	}
	if !named {
		for _, c := range commands {
			root.AddCommand(c.make(g))
		}
	}
	strictGroups(root)
	root.SetFlagErrorFunc(flagError)
	return root
}

// flagError adds to an unknown flag the command's flag it is likely a typo
// of, and to a flag that 'compute update' cannot take why.
func flagError(c *cobra.Command, err error) error {
	// A group's flags are parsed before its unknown subcommand is seen
	// ("compute creat --name x"): the mistyped word, not the flag, is the
	// error worth a suggestion.
	if c.HasSubCommands() && c.Flags().NArg() > 0 {
		return unknownSubcommand(c, c.Flags().Arg(0))
	}
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if s := closest(name, names); s != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, s)
	}
	return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
}

// strictGroups makes every command group refuse an unknown subcommand, as
// the root does, instead of printing its help and exiting 0: the error
// names the closest subcommands ("did you mean create?").
func strictGroups(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		strictGroups(sub)
	}
	if cmd.Runnable() || !cmd.HasSubCommands() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownSubcommand(c, args[0])
	}
}

// unknownSubcommand is the error for a word that names no subcommand of
// the group c, with the subcommands it resembles.
func unknownSubcommand(c *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg + " (see '" + c.CommandPath() + " --help')")
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
		return cfg, path, missingConfig(path)
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

// missingConfig explains a missing CLI config: where it was looked for,
// and how to point the CLI at the server's when that one runs with
// another data dir.
func missingConfig(path string) error {
	hint := "start the server once with 'cumulus serve' (it writes that file)"
	if os.Getenv("CUMULUS_CONFIG") == "" && os.Getenv("CUMULUS_DATA_DIR") == "" {
		hint += "; if the server runs with CUMULUS_DATA_DIR=DIR, set the same CUMULUS_DATA_DIR here or pass --config DIR/config.yaml"
	}
	return fmt.Errorf("no CLI config at %s: %s; or pass --server and set CUMULUS_TOKEN", path, hint)
}
