package cli

import (
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/procs"
)

// Every top-level command is either one-shot (one processor, package
// procs) or one of those that work on their own and keep every
// processor: a new command is sorted into one or the other.
func TestEveryCommandIsSortedByProcessors(t *testing.T) {
	keepAll := []string{"serve", "agent", "sim", "store", "node-image", "ui"}
	names := map[string]bool{}
	for _, c := range commands {
		names[c.name] = true
		one, all := procs.IsOneShot([]string{c.name}), slices.Contains(keepAll, c.name)
		if one == all {
			t.Errorf("command %s: one-shot %v, keeps every processor %v; sort it into one (procs.OneShot) or the other", c.name, one, all)
		}
	}
	for _, c := range procs.OneShot {
		if !names[c.Name] {
			t.Errorf("procs.OneShot names %s, which is no command", c.Name)
		}
		for _, sub := range c.Except {
			if cmd, _, err := NewRoot(nil, nil).Find([]string{c.Name, sub}); err != nil || cmd.Name() != sub {
				t.Errorf("procs.OneShot names %s %s, which is no command", c.Name, sub)
			}
		}
	}
}
