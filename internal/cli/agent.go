package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/agent"
	"github.com/cumulus-ml/cumulus/internal/provider/sim"
)

func newAgentCmd(g *globals) *cobra.Command {
	cfg := agent.DefaultConfig()
	var server, logLevel, logFormat, hostDir string
	var simHost bool
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: join the control plane and run the jobs it assigns",
		Long: `Run the Cumulus node agent. It registers this machine as a node with the
control plane, long-polls it for work, runs each assigned job as a process in
its own working directory under --work-dir, streams the job's log and uploads
its outputs. Providers start it for you; run it by hand to add a machine.
SIGTERM or Ctrl-C stops the running job gracefully, reports it, and exits 0.`,
		Example: `  cumulus agent --server https://10.0.0.4:8787 --join-token "$TOKEN" --ca-file ca.pem`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hostDir != "" {
				return runNodeHost(cmd, g, cfg, hostDir, logLevel, logFormat)
			}
			if simHost {
				log, err := newLogger(g, logLevel, logFormat)
				if err != nil {
					return err
				}
				return sim.ServeHost(cmd.InOrStdin(), cmd.OutOrStdout(), log)
			}
			fl := cmd.Flags()
			pick := func(dst *string, flag, env string) {
				if !fl.Changed(flag) {
					if v := os.Getenv(env); v != "" {
						*dst = v
					}
				}
			}
			if !fl.Changed("server") && g.server != "" {
				server = g.server // given before the subcommand
			}
			pick(&server, "server", "CUMULUS_SERVER")
			pick(&cfg.JoinToken, "join-token", "CUMULUS_JOIN_TOKEN")
			pick(&cfg.NodeID, "node-id", "CUMULUS_NODE_ID")
			pick(&cfg.WorkDir, "work-dir", "CUMULUS_WORK_DIR")
			pick(&cfg.CAFile, "ca-file", "CUMULUS_CA_FILE")
			pick(&cfg.TLSServerName, "tls-server-name", "CUMULUS_TLS_SERVER_NAME")
			pick(&cfg.Address, "address", "CUMULUS_ADDRESS")
			pick(&cfg.GPUDevices, "gpu-devices", "CUMULUS_GPU_DEVICES")
			cfg.JobNetwork = os.Getenv("CUMULUS_JOB_NETWORK") // set by the docker provider for nodes in networks of their own
			cfg.Image = os.Getenv("CUMULUS_NODE_IMAGE")       // set by providers that make the node from a job's image
			if pem := os.Getenv("CUMULUS_CA_PEM"); pem != "" && cfg.CAFile == "" {
				// The CA as text (a Kubernetes node pod reads it from its secret).
				path, err := writeCA(cfg.WorkDir, pem)
				if err != nil {
					return err
				}
				cfg.CAFile = path
			}
			cfg.ServerURL = server
			var err error
			if cfg.VCPUs, err = envInt("CUMULUS_VCPUS"); err != nil {
				return err
			}
			if cfg.MemoryMB, err = envInt("CUMULUS_MEMORY_MB"); err != nil {
				return err
			}
			if cfg.Log, err = newLogger(g, logLevel, logFormat); err != nil {
				return err
			}
			cfg.Version = Version
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return agent.Run(ctx, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", "control plane URL, or its replicas' URLs comma-separated (env CUMULUS_SERVER)")
	fl.StringVar(&cfg.JoinToken, "join-token", "", "token to join with (env CUMULUS_JOIN_TOKEN)")
	fl.StringVar(&cfg.NodeID, "node-id", "", "node id the control plane gave this node (env CUMULUS_NODE_ID; empty: assigned at registration)")
	fl.StringVar(&cfg.WorkDir, "work-dir", cfg.WorkDir, "directory for the node identity and job folders (env CUMULUS_WORK_DIR)")
	fl.StringVar(&cfg.CAFile, "ca-file", "", "PEM file of the CA to trust for the server (env CUMULUS_CA_FILE, or the PEM itself in CUMULUS_CA_PEM)")
	fl.StringVar(&cfg.TLSServerName, "tls-server-name", "", "name to check the server's certificate for, when it is not the --server URL's host (env CUMULUS_TLS_SERVER_NAME)")
	fl.StringVar(&cfg.Address, "address", "", "IP address other nodes reach this node at, or a range (CIDR) to take this machine's address in (env CUMULUS_ADDRESS; default: the first non-loopback IPv4)")
	fl.StringVar(&cfg.GPUDevices, "gpu-devices", "", "the GPUs this node offers its jobs: indexes, MIG IDs (0:1) or UUIDs comma-separated, none, all, or env:NAME for the list in variable NAME, e.g. env:CUDA_VISIBLE_DEVICES under Slurm (env CUMULUS_GPU_DEVICES; default: all nvidia-smi lists)")
	fl.StringVar(&cfg.Docker, "container-runtime", cfg.Docker, "docker CLI for jobs that name an image; none runs every job as plain processes")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (env CUMULUS_LOG_LEVEL)")
	fl.StringVar(&logFormat, "log-format", "text", "text or json")
	fl.StringVar(&hostDir, "host", "", "run as the node host of this folder: the agents of the nodes a local provider asks for over the folder's socket, in this one process (the local provider starts it)")
	_ = fl.MarkHidden("host")
	fl.BoolVar(&simHost, "sim-host", false, "run the simulated agents a sim provider asks for on standard input, reporting on standard output (serve --provider sim --sim-host-process starts it)")
	_ = fl.MarkHidden("sim-host")
	return cmd
}

// runNodeHost runs `cumulus agent --host DIR`: the agents of several local
// nodes in one process (agent.Host). Each node's settings come over the
// host's socket; the container runtime and the log level and format are
// the host's.
func runNodeHost(cmd *cobra.Command, g *globals, base agent.Config, dir, level, format string) error {
	log, err := newLogger(g, level, format)
	if err != nil {
		return err
	}
	var l slog.Level
	if v := os.Getenv("CUMULUS_LOG_LEVEL"); v != "" {
		level = v
	}
	_ = l.UnmarshalText([]byte(level)) // newLogger checked it
	base.Version = Version
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return agent.Host(ctx, agent.HostConfig{Dir: dir, Base: base, Level: l, JSON: format == "json", Log: log})
}

// writeCA keeps a CA given as text in the work directory, for the agent's
// TLS client.
func writeCA(workDir, pem string) (string, error) {
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return "", fmt.Errorf("CUMULUS_CA_PEM: %w", err)
	}
	path := filepath.Join(workDir, "server-ca.crt")
	if err := os.WriteFile(path, []byte(pem), 0o600); err != nil {
		return "", fmt.Errorf("CUMULUS_CA_PEM: %w", err)
	}
	return path, nil
}

// envInt reads a whole number from an environment variable (0 when unset).
func envInt(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &envError{name, v}
	}
	return n, nil
}

type envError struct{ name, value string }

func (e *envError) Error() string {
	return e.name + "=" + strconv.Quote(e.value) + " is not a whole number"
}
