package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every flag's help says its default once: pflag adds "(default …)" for
// a non-zero default, so the text must not say it too.
func TestFlagHelpSaysDefaultOnce(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			fs.AddFlag(f)
			if u := fs.FlagUsages(); strings.Count(u, "(default") > 1 {
				t.Errorf("%s --%s: %s", c.CommandPath(), f.Name, strings.TrimSpace(u))
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRoot(io.Discard, io.Discard))
}
