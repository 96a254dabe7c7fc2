package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// newLockCmd is 'cumulus lock', after 'az lock': management locks on the
// workspace or one of its computes.
func newLockCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Manage locks that stop a workspace or compute from being deleted (CanNotDelete) or changed (ReadOnly)",
		Long: `Locks refuse people's requests, whatever their role: CanNotDelete refuses deleting
the locked workspace or compute (and, at a workspace, its computes and jobs);
ReadOnly also refuses changing it, reading its admin credentials and, at a
workspace, creating computes and jobs in it. Autoscaling is never blocked.
Only an Owner creates or deletes locks.`,
	}
	cmd.AddCommand(newLockCreateCmd(g), newLockListCmd(g), newLockShowCmd(g), newLockDeleteCmd(g))
	return cmd
}

// lockLevel reads --lock-type in any case.
func lockLevel(v string) (string, error) {
	for _, l := range []string{api.LockCanNotDelete, api.LockReadOnly} {
		if strings.EqualFold(v, l) {
			return l, nil
		}
	}
	return "", fmt.Errorf("--lock-type %q is not one of CanNotDelete, ReadOnly", v)
}

func lockTable(ls ...api.Lock) func() *table {
	return func() *table {
		t := &table{header: []string{"NAME", "LEVEL", "ON", "NOTES"}}
		for _, l := range ls {
			t.add(l.Name, l.Properties.Level, lockScopeName(l.ID), l.Properties.Notes)
		}
		return t
	}
}

// lockScopeName names a lock's scope briefly: "compute cpu", "workspace ws".
func lockScopeName(id string) string {
	scope := id
	if i := strings.LastIndex(strings.ToLower(scope), "/providers/microsoft.authorization/locks/"); i >= 0 {
		scope = scope[:i]
	}
	segs := strings.Split(scope, "/")
	if n := len(segs); n >= 2 {
		switch strings.ToLower(segs[n-2]) {
		case "computes":
			return "compute " + segs[n-1]
		case "workspaces":
			return "workspace " + segs[n-1]
		}
	}
	return scope
}

func newLockCreateCmd(g *globals) *cobra.Command {
	var name, level, compute, notes string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create or change a lock on the workspace, or on a compute with --compute",
		Example: `  cumulus lock create -n keep --lock-type CanNotDelete
  cumulus lock create -n frozen --lock-type ReadOnly --compute gpu-cluster --notes "benchmark runs"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lv, err := lockLevel(level)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.PutLock(cmd.Context(), compute, name, api.LockProperties{Level: lv, Notes: notes})
			if err != nil {
				return err
			}
			return g.show("json", l, lockTable(l))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the lock")
	fl.StringVarP(&level, "lock-type", "t", "", "CanNotDelete or ReadOnly")
	fl.StringVar(&compute, "compute", "", "lock this compute instead of the workspace")
	fl.StringVar(&notes, "notes", "", "why the lock is there (at most 512 characters)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("lock-type")
	return cmd
}

func newLockListCmd(g *globals) *cobra.Command {
	var compute string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the locks on the workspace and its computes, or those that apply to one compute",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ls, err := c.ListLocks(cmd.Context(), compute)
			if err != nil {
				return err
			}
			return g.show("table", ls, lockTable(ls...))
		},
	}
	cmd.Flags().StringVar(&compute, "compute", "", "the locks that apply to this compute: its own and the workspace's")
	return cmd
}

func newLockShowCmd(g *globals) *cobra.Command {
	var name, compute string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a lock of the workspace, or of a compute with --compute",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.GetLock(cmd.Context(), compute, name)
			if err != nil {
				return err
			}
			return g.show("json", l, lockTable(l))
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the lock")
	cmd.Flags().StringVar(&compute, "compute", "", "the lock is on this compute")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newLockDeleteCmd(g *globals) *cobra.Command {
	var name, compute string
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a lock of the workspace, or of a compute with --compute",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			existed, err := c.DeleteLock(cmd.Context(), compute, name)
			if err != nil {
				return err
			}
			if !existed {
				return fmt.Errorf("lock %s does not exist", name)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the lock")
	cmd.Flags().StringVar(&compute, "compute", "", "the lock is on this compute")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
