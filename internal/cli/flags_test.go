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

// A run builds only the top-level command it names (a job create builds
// no other command's flags); each entry of the table is the command it
// names, and a run that names none builds them all.
func TestRootBuildsTheNamedCommandOnly(t *testing.T) {
	full := newRoot(io.Discard, io.Discard, []string{"--help"})
	if got, want := len(full.Commands()), len(commands); got != want {
		t.Fatalf("the full tree has %d commands; the table %d", got, want)
	}
	for _, c := range commands {
		root := newRoot(io.Discard, io.Discard, []string{c.name, "--help"})
		if len(root.Commands()) != 1 || root.Commands()[0].Name() != c.name {
			var names []string
			for _, s := range root.Commands() {
				names = append(names, s.Name())
			}
			t.Errorf("a run of %q built %v", c.name, names)
		}
	}
	// A mistyped command still gets its suggestion from the whole tree.
	var stderr strings.Builder
	if code := Main(t.Context(), []string{"jbo", "list"}, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "job") {
		t.Errorf("cumulus jbo list: exit %d, %q; want a suggestion of job", code, stderr.String())
	}
}
