package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cumulus-ml/cumulus/internal/provider/slurm"
)

// slurmFlags adds the settings of --provider slurm to serve's flags.
func slurmFlags(fl *pflag.FlagSet, o *slurm.Options) {
	fl.StringVar(&o.Partition, "slurm-partition", "", "with --provider slurm: the partition of node jobs (default: Slurm's default partition); a compute's slurm.partition overrides it")
	fl.StringVar(&o.QOS, "slurm-qos", "", "with --provider slurm: the QOS of node jobs (default: the account's default)")
	fl.StringVar(&o.Account, "slurm-account", "", "with --provider slurm: the account node jobs are charged to (default: the user's default account)")
	fl.StringVar(&o.LowPriorityPartition, "slurm-low-priority-partition", "", "with --provider slurm: the partition of low-priority computes' node jobs, one Slurm preempts (default: --slurm-partition)")
	fl.StringVar(&o.LowPriorityQOS, "slurm-low-priority-qos", "", "with --provider slurm: the QOS of low-priority computes' node jobs, one Slurm preempts (default: --slurm-qos)")
	fl.StringArrayVar(&o.SbatchArgs, "slurm-sbatch-arg", nil, "with --provider slurm: one more sbatch flag for every node job, e.g. --time=7-0 or --constraint=a100 (repeat for more)")
	fl.StringVar(&o.AgentBinary, "slurm-agent-binary", "", "with --provider slurm: the cumulus executable node jobs run, at a path every compute node has, on a shared filesystem (default: this executable's path)")
	fl.StringVar(&o.WorkDir, "slurm-work-dir", slurm.DefaultWorkDir, "with --provider slurm: folder on the compute nodes of each node's work dir (jobs' folders), removed when its node job ends")
	fl.StringVar(&o.LogDir, "slurm-log-dir", slurm.DefaultLogDir, "with --provider slurm: folder on the compute nodes, which must exist there, where Slurm writes each node job's output (the agent's log): <node id>-<job id>.log")
	fl.StringVar(&o.NodeAddress, "slurm-node-address", "", "with --provider slurm: IP range (CIDR) in which each agent takes its compute node's address, for the ranks of multi-node jobs to reach each other (default: the node's first non-loopback IPv4)")
	fl.DurationVar(&o.PollInterval, "slurm-poll-interval", slurm.DefaultPollInterval, "with --provider slurm: how often Slurm's queue is read for what happened to node jobs (pending reasons, ends from outside)")
}

// slurmEnvDefaults applies CUMULUS_SLURM_* variables (CUMULUS_SLURM_PARTITION
// for --slurm-partition, …) to the slurm flags not given on the command line.
func slurmEnvDefaults(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || !strings.HasPrefix(f.Name, "slurm-") {
			return
		}
		env := "CUMULUS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && v != "" {
			if serr := cmd.Flags().Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, serr)
			}
		}
	})
	return err
}

// slurmFlagsOnlyWithSlurm refuses a --slurm-* setting (flag, variable or
// config file) on a server of another provider: it would have no effect.
func slurmFlagsOnlyWithSlurm(cmd *cobra.Command, provider string) error {
	if provider == "slurm" {
		return nil
	}
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err == nil && strings.HasPrefix(f.Name, "slurm-") {
			err = fmt.Errorf("--%s applies only with --provider slurm (this server's provider is %s)", f.Name, provider)
		}
	})
	return err
}
