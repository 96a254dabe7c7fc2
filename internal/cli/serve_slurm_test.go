package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// The slurm settings come from flags, CUMULUS_SLURM_* variables and the
// server config file; a list of sbatch flags in the file is each flag
// once, commas kept.
func TestSlurmSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(cfg, []byte("provider: slurm\nslurm-partition: gpu\nslurm-sbatch-arg: [--time=7-0, \"--constraint=a100|h100\", --gres-flags=enforce-binding]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUMULUS_SLURM_LOW_PRIORITY_PARTITION", "scavenger")
	t.Setenv("CUMULUS_SLURM_PARTITION", "ignored: the file names it")
	t.Setenv("CUMULUS_SLURM_POLL_INTERVAL", "5s")
	var cmd *cobra.Command
	cmd = newServeCmd(&globals{stdout: io.Discard, stderr: io.Discard})
	if err := cmd.Flags().Parse([]string{"--data-dir", dir, "--slurm-node-address", "10.0.0.0/8"}); err != nil {
		t.Fatal(err)
	}
	if err := applyServerConfig(cmd, cfg); err != nil {
		t.Fatal(err)
	}
	if err := slurmEnvDefaults(cmd); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	args, _ := cmd.Flags().GetStringArray("slurm-sbatch-arg")
	if want := []string{"--time=7-0", "--constraint=a100|h100", "--gres-flags=enforce-binding"}; !slices.Equal(args, want) {
		t.Errorf("sbatch args %q; want %q", args, want)
	}
	for name, want := range map[string]string{"slurm-partition": "gpu", "slurm-low-priority-partition": "scavenger",
		"slurm-poll-interval": "5s", "slurm-node-address": "10.0.0.0/8", "slurm-work-dir": "/tmp/cumulus-slurm"} {
		if got := get(name); got != want {
			t.Errorf("--%s = %q; want %q", name, got, want)
		}
	}
	if err := slurmFlagsOnlyWithSlurm(cmd, "slurm"); err != nil {
		t.Errorf("slurm settings on a slurm server: %v", err)
	}
	if err := slurmFlagsOnlyWithSlurm(cmd, "local"); err == nil {
		t.Error("slurm settings on a local server were accepted")
	}

	t.Setenv("CUMULUS_SLURM_POLL_INTERVAL", "often")
	cmd = newServeCmd(&globals{stdout: io.Discard, stderr: io.Discard})
	if err := slurmEnvDefaults(cmd); err == nil {
		t.Error("CUMULUS_SLURM_POLL_INTERVAL=often was accepted")
	}
}
