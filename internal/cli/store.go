package cli

import (
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func newStoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Move or back up the control plane's state (run on the server's machine)",
	}
	dataDir := func(c *cobra.Command) *string {
		d := config.DataDir()
		if v := os.Getenv("CUMULUS_DATA_DIR"); v != "" {
			d = v
		}
		p := new(string)
		c.Flags().StringVar(p, "data-dir", d, "the server's state directory (env CUMULUS_DATA_DIR)")
		return p
	}

	var to string
	migrate := &cobra.Command{
		Use:   "migrate --to postgres://…",
		Short: "Copy the SQLite store into an empty PostgreSQL database (stop the server first)",
		Long: `Copy every resource, job, node, token, principal, role assignment, secret,
audit entry and blob ownership of the SQLite store in --data-dir into a
PostgreSQL database that must be empty. The copy is one transaction: a
failed copy leaves the database empty. Stop the server first (writes made
after the copy began are not copied), then start it with --store.`,
		Args: cobra.NoArgs,
	}
	from := dataDir(migrate)
	migrate.Flags().StringVar(&to, "to", "", "the PostgreSQL database: postgres://USER:PASSWORD@HOST/DB (required)")
	migrate.RunE = func(cmd *cobra.Command, _ []string) error {
		if !store.IsPostgres(to) {
			return fmt.Errorf("--to must be a postgres:// URL")
		}
		src, err := openExisting(cmd, *from)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := store.OpenPostgres(cmd.Context(), to)
		if err != nil {
			return err
		}
		defer dst.Close()
		report, err := store.Copy(cmd.Context(), src, dst)
		if err != nil {
			return err
		}
		tables := make([]string, 0, len(report))
		for t := range report {
			tables = append(tables, t)
		}
		sort.Strings(tables)
		for _, t := range tables {
			fmt.Fprintf(g.stdout, "%-18s %d\n", t, report[t])
		}
		fmt.Fprintf(g.stdout, "Copied into %s. Start the server with --store (or CUMULUS_STORE) naming it.\n", store.Redact(to))
		return nil
	}

	var file string
	backup := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write a consistent copy of the SQLite store to FILE, while the server runs",
		Long: `Write a consistent copy of the SQLite store in --data-dir to a new file,
readable by its owner only, while the server keeps serving. To restore,
stop the server and put the copy in place of <data dir>/cumulus.db
(removing cumulus.db-wal and cumulus.db-shm). A PostgreSQL store is backed
up with pg_dump.`,
		Args: cobra.NoArgs,
	}
	dir := dataDir(backup)
	backup.Flags().StringVar(&file, "to", "", "the new file (required)")
	backup.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return fmt.Errorf("--to FILE is required")
		}
		db, err := openExisting(cmd, *dir)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Backup(cmd.Context(), file); err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "Backed up to %s\n", file)
		return nil
	}
	_ = migrate.MarkFlagRequired("to")
	_ = backup.MarkFlagRequired("to")
	cmd.AddCommand(migrate, backup)
	return cmd
}

// openExisting opens the SQLite store of a data dir that has one (it
// does not make a new, empty one).
func openExisting(cmd *cobra.Command, dataDir string) (*store.DB, error) {
	path := dataDir + "/cumulus.db"
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no store at %s: %w", path, err)
	}
	return store.OpenSQLite(cmd.Context(), path)
}
