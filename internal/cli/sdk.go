package cli

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/config"
)

// The official Azure SDKs (Python azure-ai-ml and the management SDKs,
// JavaScript, Go) send bearer tokens only over https, verify the server's
// certificate against their trust store, and each find the API's endpoint
// their own way. 'cumulus sdk env' prints, for the server the CLI config
// names, the environment each of them needs.

func newSDKCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sdk", Short: "Settings for official Azure SDKs (Python azure-ai-ml, management SDKs, JavaScript, Go)"}
	cmd.AddCommand(newSDKEnvCmd(g), newSDKTokenCmd(g))
	return cmd
}

// sdkVar is one environment variable and who reads it.
type sdkVar struct{ name, value, readBy string }

// sdkVars are the variables for the server cfg describes. tokenCmd is the
// command line that prints the token.
func sdkVars(cfg config.CLI, tokenCmd string) []sdkVar {
	endpoint := strings.TrimRight(strings.TrimSpace(strings.Split(cfg.Server, ",")[0]), "/")
	vars := []sdkVar{
		{"CUMULUS_ENDPOINT", endpoint, "the Resource Manager endpoint to give the management, JavaScript and Go SDKs (base_url, endpoint, cloud configuration)"},
		{"AZUREML_DEV_URL_MFE", endpoint, "azure-ai-ml: the Resource Manager endpoint MLClient calls"},
		{"AZURE_SUBSCRIPTION_ID", cfg.Subscription, "the subscription of the workspace"},
		{"AZURE_RESOURCE_GROUP", cfg.ResourceGroup, "its resource group"},
		{"AZUREML_WORKSPACE_NAME", cfg.Workspace, "the workspace"},
	}
	if cfg.CAFile != "" {
		ca, err := filepath.Abs(cfg.CAFile)
		if err != nil {
			ca = cfg.CAFile
		}
		vars = append(vars,
			sdkVar{"REQUESTS_CA_BUNDLE", ca, "Python (requests, used by azure-core): trust the server's certificate"},
			sdkVar{"NODE_EXTRA_CA_CERTS", ca, "Node.js: trust the server's certificate besides the usual ones"},
			sdkVar{"SSL_CERT_FILE", ca, "Go (crypto/x509) and OpenSSL: trust the server's certificate"},
		)
	}
	if strings.HasPrefix(endpoint, "https://") {
		// azure-ai-ml reaches datastores at https://<account>.blob.core.windows.net,
		// which it builds itself: the server answers those names as an
		// HTTPS proxy (and refuses every other host), so the server's own
		// address is left out of it.
		host := endpoint
		if u, err := url.Parse(endpoint); err == nil {
			host = u.Hostname()
		}
		for _, v := range []sdkVar{
			{"HTTPS_PROXY", endpoint, "azure-ai-ml's datastore uploads and downloads (<account>.blob.core.windows.net) go to the server, which proxies no other host"},
			{"https_proxy", endpoint, "the same, for programs that read the lower-case name"},
			{"NO_PROXY", host, "the server itself is reached directly"},
			{"no_proxy", host, "the same, lower case"},
		} {
			vars = append(vars, v)
		}
	}
	vars = append(vars, sdkVar{"CUMULUS_TOKEN", "$(" + tokenCmd + ")", "the bearer token the examples' credential hands out"})
	return vars
}

func newSDKEnvCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print the environment official Azure SDKs need to reach this server, as sh exports",
		Long: `Print, as sh exports, what official Azure SDKs need to reach the server the
CLI config names: the endpoint (AZUREML_DEV_URL_MFE for azure-ai-ml,
CUMULUS_ENDPOINT for the others), the workspace, the server's CA certificate
for Python (REQUESTS_CA_BUNDLE), Node.js (NODE_EXTRA_CA_CERTS) and Go
(SSL_CERT_FILE), HTTPS_PROXY and NO_PROXY (azure-ai-ml reaches datastores at
https://<account>.blob.core.windows.net, which the server answers as an
HTTPS proxy for those names only), and CUMULUS_TOKEN from 'cumulus sdk
token'. Use it as

  eval "$(cumulus sdk env)"

The SDKs send tokens only over https: start the server with
--tls-self-signed (or --tls-cert/--tls-key). REQUESTS_CA_BUNDLE and
SSL_CERT_FILE replace the default trust store of the processes that see
them; set them only for programs that talk to Cumulus.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := g.settings()
			if err != nil {
				return err
			}
			tokenCmd := "cumulus sdk token"
			if g.configPath != "" {
				tokenCmd = "cumulus --config " + shellQuote(path) + " sdk token"
			}
			if !strings.HasPrefix(cfg.Server, "https://") {
				fmt.Fprintf(g.stderr, "warning: %s is not https; the Azure SDKs refuse to send a bearer token over http. Restart the server with --tls-self-signed.\n", cfg.Server)
			}
			for _, v := range sdkVars(cfg, tokenCmd) {
				value := shellQuote(v.value)
				if strings.HasPrefix(v.value, "$(") {
					value = `"` + v.value + `"`
				}
				fmt.Fprintf(g.stdout, "# %s\nexport %s=%s\n", v.readBy, v.name, value)
			}
			return nil
		},
	}
}

func newSDKTokenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token of the CLI config, for an SDK's credential",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := g.settings()
			if err != nil {
				return err
			}
			if cfg.Token == "" {
				return fmt.Errorf("no token in %s or CUMULUS_TOKEN: create one with 'cumulus auth token create'", path)
			}
			fmt.Fprintln(g.stdout, cfg.Token)
			return nil
		},
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
