package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// usageEnvDefaults applies CUMULUS_USAGE_INTERVAL and
// CUMULUS_USAGE_RETENTION to the flags not given on the command line.
func usageEnvDefaults(cmd *cobra.Command, o *daemon.Options) error {
	for _, s := range []struct {
		env, flag string
		dst       *time.Duration
	}{
		{"CUMULUS_USAGE_INTERVAL", "usage-interval", &o.UsageInterval},
		{"CUMULUS_USAGE_RETENTION", "usage-retention", &o.UsageRetention},
	} {
		v := os.Getenv(s.env)
		if v == "" || cmd.Flags().Changed(s.flag) {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s=%q is not a duration such as 15s or 24h", s.env, v)
		}
		*s.dst = d
	}
	return nil
}
