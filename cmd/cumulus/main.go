// Command cumulus is the whole of Cumulus: the control plane (serve), the
// node agent (agent) and the CLI.
package main

import (
	"context"
	"os"
	_ "time/tzdata" // compute schedules name IANA time zones: work on machines without /usr/share/zoneinfo

	"github.com/cumulus-ml/cumulus/internal/cli"
	_ "github.com/cumulus-ml/cumulus/internal/procs" // before the other inits: a one-shot command runs on one processor
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
