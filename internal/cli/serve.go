package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
	"github.com/cumulus-ml/cumulus/internal/replica"
)

func newServeCmd(g *globals) *cobra.Command {
	o := daemon.DefaultOptions()
	var logLevel, logFormat, serverConfig string
	isolateJobs, nodeHost := true, true
	var simHostProcess bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane (API, controllers, store) on this machine",
		Long: `Run the Cumulus control plane. With no flags it listens on 127.0.0.1:8787,
keeps its state in ~/.cumulus (SQLite; --data-dir or CUMULUS_DATA_DIR), and on
first start creates an admin token and writes <data dir>/config.yaml so the CLI
works at once. With another data dir it prints the line that points a second
shell's CLI at that file. Node agents outlive Ctrl-C and rejoin at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyServerConfig(cmd, serverConfig); err != nil {
				return err
			}
			envDefaults(cmd, &o)
			if err := slurmEnvDefaults(cmd); err != nil {
				return err
			}
			if err := slurmFlagsOnlyWithSlurm(cmd, o.Provider); err != nil {
				return err
			}
			if err := usageEnvDefaults(cmd, &o); err != nil {
				return err
			}
			if v := os.Getenv("CUMULUS_ISOLATE_JOBS"); v != "" && !cmd.Flags().Changed("isolate-jobs") {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("CUMULUS_ISOLATE_JOBS=%q is not true or false", v)
				}
				isolateJobs = b
			}
			o.JobsAsServerUser = !isolateJobs
			if v := os.Getenv("CUMULUS_NODE_HOST"); v != "" && !cmd.Flags().Changed("node-host") {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("CUMULUS_NODE_HOST=%q is not true or false", v)
				}
				nodeHost = b
			}
			o.ProcessPerNode = !nodeHost
			if simHostProcess {
				if o.Provider != "sim" {
					return fmt.Errorf("--sim-host-process is for --provider sim, not %s", o.Provider)
				}
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--sim-host-process: %w", err)
				}
				o.SimHost = []string{exe, "agent", "--sim-host"}
			}
			if v := os.Getenv("CUMULUS_EVENT_RETENTION"); v != "" && !cmd.Flags().Changed("event-retention") {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("CUMULUS_EVENT_RETENTION=%q is not a duration such as 720h", v)
				}
				o.EventRetention = d
			}
			if o.EventRetention < time.Hour {
				return fmt.Errorf("--event-retention %s is too short: keep events at least 1h", o.EventRetention)
			}
			// The default hold is cut to a third of a shorter heartbeat
			// timeout; one asked for is refused instead.
			if o.PollTimeout < time.Second || cmd.Flags().Changed("poll-timeout") && o.PollTimeout >= o.HeartbeatTimeout {
				return fmt.Errorf("--poll-timeout %s must be at least 1s and shorter than --heartbeat-timeout (%s)", o.PollTimeout, o.HeartbeatTimeout)
			}
			log, err := newLogger(g, logLevel, logFormat)
			if err != nil {
				return err
			}
			o.Log = log
			if g.configPath != "" {
				o.ConfigPath = g.configPath
			} else if p := os.Getenv("CUMULUS_CONFIG"); p != "" {
				o.ConfigPath = p
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			d, err := daemon.Start(ctx, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "Cumulus is serving at %s (state in %s). Press Ctrl-C to stop.\n", d.URL, o.DataDir)
			if hint := configHint(o); hint != "" {
				fmt.Fprintln(g.stderr, hint)
			}
			<-ctx.Done()
			log.Info("shutting down")
			if o.Provider == "local" || o.Provider == "docker" || o.Provider == "slurm" {
				defer fmt.Fprintln(g.stderr, "Stopped. Node agents keep running with their jobs and rejoin at the next 'cumulus serve', which then removes idle nodes as usual; to remove them now, scale or delete the computes before stopping.")
			}
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return d.Close(sctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Listen, "listen", o.Listen, "address to listen on (env CUMULUS_LISTEN)")
	fl.StringVar(&o.DataDir, "data-dir", o.DataDir, "state directory (env CUMULUS_DATA_DIR); with several replicas, one shared directory")
	fl.StringVar(&o.Store, "store", "", "where the state lives: a postgres://USER:PASSWORD@HOST/DB URL shared by several replicas, or empty for the SQLite file <data dir>/cumulus.db (env CUMULUS_STORE)")
	fl.StringSliceVar(&o.Replicas, "replicas", nil, "the API URLs of every replica, comma-separated, handed to agents and the CLI config so they fail over (env CUMULUS_REPLICAS; default: this server's URL)")
	fl.DurationVar(&o.LeaderLease, "leader-lease", replica.DefaultLease, "with a PostgreSQL store: how long the replica running the controllers holds its lease unrenewed; a dead leader's successor takes over within it")
	fl.StringVar(&o.MetricsListen, "metrics-listen", "", "also serve the Prometheus metrics at /metrics on this loopback address, without authentication, e.g. 127.0.0.1:9787 (env CUMULUS_METRICS_LISTEN; the API listener serves them to signed-in readers either way)")
	fl.StringVar(&o.NodesDir, "nodes-dir", "", "with --provider local: folder of the node folders where jobs run, outside the data dir (env CUMULUS_NODES_DIR; default <data dir>-nodes)")
	fl.StringVar(&o.JobUsersDir, "job-users-dir", "", "with --provider local and isolated jobs: the machine's folder (root's) where each nodes dir claims its block of job users, so that two servers on one machine never share them (env CUMULUS_JOB_USERS_DIR; default "+local.DefaultJobUsersDir+")")
	fl.BoolVar(&nodeHost, "node-host", true, "with --provider local: run a compute's nodes in one agent process, its node host (env CUMULUS_NODE_HOST); false gives each node a process of its own, so that a crash costs one node, for about 2.4 MB more memory (PSS) a node")
	fl.BoolVar(&isolateJobs, "isolate-jobs", true, "with --provider local: run each node's jobs as a user of their own that cannot see the data dir, other nodes or the agent (needs root; env CUMULUS_ISOLATE_JOBS); false runs them as the server's user")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (PEM)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "TLS key file (PEM)")
	fl.BoolVar(&o.TLSSelfSigned, "tls-self-signed", false, "serve HTTPS with a self-signed certificate for localhost, kept in the data dir")
	fl.StringVar(&o.PublicURL, "public-url", "", "base URL clients reach the server at, if not the listen address")
	fl.StringVar(&o.Defaults.Subscription, "subscription-id", o.Defaults.Subscription, "default subscription id")
	fl.StringVar(&o.Defaults.ResourceGroup, "default-resource-group", o.Defaults.ResourceGroup, "default resource group")
	fl.StringVar(&o.Defaults.Location, "location", o.Defaults.Location, "default location")
	fl.StringSliceVar(&o.Locations, "locations", nil, "the locations this server serves, comma-separated; computes, workspaces, quotas and usages in any other are refused (env CUMULUS_LOCATIONS; default: the --location alone)")
	fl.Var((*byteSize)(&o.MaxBlobSize), "max-blob-size", "largest blob (code snapshot, input folder) one upload may store, e.g. 1GiB, 512MiB or bytes")
	fl.Var((*byteSize)(&o.Limits.WorkspaceBlobs), "max-workspace-blobs", "most bytes of blobs one workspace may own, e.g. 100GiB")
	fl.Var((*byteSize)(&o.Limits.WorkspaceRunData), "max-workspace-run-data", "most bytes of MLflow params, tags and metric values the jobs of one workspace may keep together, e.g. 1GiB")
	fl.Var((*byteSize)(&o.Limits.JobLog), "max-job-log", "most bytes of log kept of each node of each attempt of a job; the rest is dropped and the log says so")
	fl.DurationVar(&o.BlobGrace, "blob-grace", o.BlobGrace, "an uploaded blob that no job references is removed this long after its last upload")
	fl.StringVar(&o.PriceFile, "price-file", "", "YAML file of hourly prices per VM size and tier, with a currency, for cost reports (env CUMULUS_PRICE_FILE; default: the catalogue's Azure list prices in USD)")
	fl.StringVar(&o.SizesFile, "sizes-file", "", "YAML file of VM sizes of your own hardware (name, family, vCPUs, memoryGB, gpus, gpuModel, price), added to the catalogue (env CUMULUS_SIZES_FILE; see docs/providers.md)")
	fl.StringVar(&o.GPUModelMatch, "gpu-model-match", "count", "how a size's GPU model is matched against this machine's GPUs (local and docker providers): count (any GPU serves any size) or strict (only GPUs of the size's model) (env CUMULUS_GPU_MODEL_MATCH)")
	fl.DurationVar(&o.EventRetention, "event-retention", controller.DefaultEventRetention, "how long the history of compute and node events is kept (env CUMULUS_EVENT_RETENTION); a job's history lives as long as the job")
	fl.StringVar(&o.Defaults.Workspace, "default-workspace", o.Defaults.Workspace, "workspace created on first start")
	fl.Int64Var(&o.Quotas.FamilyCores, "quota-family-cores", o.Quotas.FamilyCores, "default dedicated core limit per VM family and location")
	fl.Int64Var(&o.Quotas.TotalCores, "quota-total-cores", o.Quotas.TotalCores, "default total dedicated core limit per location")
	fl.Int64Var(&o.Quotas.LowPriorityCores, "quota-low-priority-cores", o.Quotas.LowPriorityCores, "default low-priority core limit per location")
	fl.BoolVar(&o.NewAdminToken, "new-admin-token", false, "mint a new admin token and rewrite the CLI config")
	fl.StringVar(&o.Provider, "provider", o.Provider, "where the nodes of every cluster come from: local (agent processes on this machine), docker (a container per node), kubernetes (a pod per node), slurm (a Slurm job per node, submitted from this machine) or sim (simulated agents, for benchmarks)")
	fl.BoolVar(&simHostProcess, "sim-host-process", false, "with --provider sim: run the simulated agents in one process of their own, as real agents would be, rather than in the server's")
	fl.DurationVar(&o.SimJobDuration, "sim-job-duration", o.SimJobDuration, "with --provider sim: how long a simulated job runs (a job's environment variable SIM_JOB_DURATION overrides it)")
	fl.StringVar(&o.NodeImage, "node-image", o.NodeImage, "with --provider docker: the node image, built from this binary at start if missing (see 'cumulus node-image build'); with --provider kubernetes: the image node pods run, pulled by the cluster")
	fl.StringVar(&o.Kubeconfig, "kubeconfig", "", "with --provider kubernetes: kubeconfig file (env CUMULUS_KUBECONFIG; default: in-cluster config in a pod, else $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&o.KubeNamespace, "kube-namespace", "", "with --provider kubernetes: namespace of the node pods (env CUMULUS_KUBE_NAMESPACE; default: the kubeconfig's)")
	slurmFlags(fl, &o.Slurm)
	fl.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a node not heard from for this long becomes unusable and its job is requeued")
	fl.DurationVar(&o.PollTimeout, "poll-timeout", o.PollTimeout, "how long an agent's poll is held while there is nothing to tell it: every idle node polls once per this, so a large fleet wants it longer (raise --heartbeat-timeout above it too)")
	fl.DurationVar(&o.ProvisionTimeout, "provisioning-timeout", o.ProvisionTimeout, "a node that has not registered after this long is given up")
	fl.IntVar(&o.MaxAttempts, "max-attempts", o.MaxAttempts, "times a job is started before a node failure makes it fail")
	fl.Float64Var(&o.EvictionRate, "eviction-rate", 0, "preempt low-priority nodes at random, this many times per node-hour (chaos testing)")
	fl.DurationVar(&o.BodyTimeout, "body-timeout", o.BodyTimeout, "a request must send its body within this long (an upload: may pause no longer), else it is answered 408 and its connection closed")
	fl.DurationVar(&o.UploadTimeout, "upload-timeout", o.UploadTimeout, "an upload (code snapshot, input folder, job output, log chunk) must be sent within this long")
	fl.DurationVar(&o.UsageInterval, "usage-interval", o.UsageInterval, "how often node agents sample CPU, memory, GPU, disk and network utilization of their node and jobs (env CUMULUS_USAGE_INTERVAL)")
	fl.DurationVar(&o.UsageRetention, "usage-retention", o.UsageRetention, "how long utilization samples are kept (env CUMULUS_USAGE_RETENTION)")
	fl.StringSliceVar(&o.WebhookAllow, "webhook-allow", nil, "address ranges (CIDRs or addresses, comma-separated) that budget webhooks may reach besides the public internet: loopback, link-local (cloud metadata), private and reserved ranges are refused otherwise (env CUMULUS_WEBHOOK_ALLOW)")
	fl.StringVar(&serverConfig, "server-config", "", "YAML file of serve settings, keys named like these flags (env CUMULUS_SERVER_CONFIG; default <data dir>/server.yaml if it exists); flags win")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (env CUMULUS_LOG_LEVEL)")
	fl.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

// envDefaults applies CUMULUS_* variables to flags not given on the command line.
func envDefaults(cmd *cobra.Command, o *daemon.Options) {
	if v := os.Getenv("CUMULUS_LISTEN"); v != "" && !cmd.Flags().Changed("listen") {
		o.Listen = v
	}
	if v := os.Getenv("CUMULUS_METRICS_LISTEN"); v != "" && !cmd.Flags().Changed("metrics-listen") {
		o.MetricsListen = v
	}
	if v := os.Getenv("CUMULUS_PRICE_FILE"); v != "" && !cmd.Flags().Changed("price-file") {
		o.PriceFile = v
	}
	if v := os.Getenv("CUMULUS_SIZES_FILE"); v != "" && !cmd.Flags().Changed("sizes-file") {
		o.SizesFile = v
	}
	if v := os.Getenv("CUMULUS_GPU_MODEL_MATCH"); v != "" && !cmd.Flags().Changed("gpu-model-match") {
		o.GPUModelMatch = v
	}
	if v := os.Getenv("CUMULUS_STORE"); v != "" && !cmd.Flags().Changed("store") {
		o.Store = v
	}
	if v := os.Getenv("CUMULUS_REPLICAS"); v != "" && !cmd.Flags().Changed("replicas") {
		o.Replicas = splitList(v)
	}
	if v := os.Getenv("CUMULUS_DATA_DIR"); v != "" && !cmd.Flags().Changed("data-dir") {
		o.DataDir = v
	}
	if v := os.Getenv("CUMULUS_NODES_DIR"); v != "" && !cmd.Flags().Changed("nodes-dir") {
		o.NodesDir = v
	}
	if v := os.Getenv("CUMULUS_JOB_USERS_DIR"); v != "" && !cmd.Flags().Changed("job-users-dir") {
		o.JobUsersDir = v
	}
	if v := os.Getenv("CUMULUS_LOCATIONS"); v != "" && !cmd.Flags().Changed("locations") {
		o.Locations = splitList(v)
	}
	if v := os.Getenv("CUMULUS_WEBHOOK_ALLOW"); v != "" && !cmd.Flags().Changed("webhook-allow") {
		o.WebhookAllow = splitList(v)
	}
	if v := os.Getenv("CUMULUS_KUBECONFIG"); v != "" && !cmd.Flags().Changed("kubeconfig") {
		o.Kubeconfig = v
	}
	if v := os.Getenv("CUMULUS_KUBE_NAMESPACE"); v != "" && !cmd.Flags().Changed("kube-namespace") {
		o.KubeNamespace = v
	}
}

func newLogger(g *globals, level, format string) (*slog.Logger, error) {
	if v := os.Getenv("CUMULUS_LOG_LEVEL"); v != "" {
		level = v
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q is not one of text, json", format)
}

// applyServerConfig sets every flag the YAML file names that was not given
// on the command line. Keys are the flag names (listen, quota-family-cores,
// …); an unknown key is an error, not a silently ignored setting.
func applyServerConfig(cmd *cobra.Command, path string) error {
	explicit := path != ""
	if path == "" {
		path = os.Getenv("CUMULUS_SERVER_CONFIG")
		explicit = path != ""
	}
	if path == "" {
		dir, _ := cmd.Flags().GetString("data-dir")
		if v := os.Getenv("CUMULUS_DATA_DIR"); v != "" && !cmd.Flags().Changed("data-dir") {
			dir = v
		}
		path = filepath.Join(dir, "server.yaml")
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	var settings map[string]any
	if err := yaml.Unmarshal(b, &settings); err != nil {
		return fmt.Errorf("server config %s: %w", path, err)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := cmd.Flags().Lookup(k)
		if f == nil || k == "server-config" {
			return fmt.Errorf("server config %s: unknown setting %q (settings are named like the flags of 'cumulus serve')", path, k)
		}
		if f.Changed {
			continue
		}
		values := []string{settingValue(settings[k])}
		if list, ok := settings[k].([]any); ok && f.Value.Type() == "stringArray" {
			values = values[:0] // a repeatable flag (--slurm-sbatch-arg): each item once, commas kept
			for _, x := range list {
				values = append(values, fmt.Sprint(x))
			}
		}
		for _, v := range values {
			if err := cmd.Flags().Set(k, v); err != nil {
				return fmt.Errorf("server config %s: %s: %w", path, k, err)
			}
		}
	}
	return nil
}

// configHint is the line serve prints when the CLI config it writes is not
// where a shell without CUMULUS_* variables looks (~/.cumulus/config.yaml).
func configHint(o daemon.Options) string {
	path := o.ConfigPath
	if path == "" {
		path = filepath.Join(o.DataDir, "config.yaml")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if home, err := os.UserHomeDir(); err == nil && abs == filepath.Join(home, ".cumulus", "config.yaml") {
		return ""
	}
	return fmt.Sprintf("The CLI config is %s; in another shell: export CUMULUS_CONFIG=%s", abs, abs)
}
