package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDatabaseFilesArePrivate: the database and the -wal and -shm files
// SQLite makes beside it are the owner's alone, whatever the umask.
func TestDatabaseFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cumulus.db")
	db, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := PutSecret(context.Background(), db.W(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %o; want no access for group and others", filepath.Base(p), m)
		}
	}
}
