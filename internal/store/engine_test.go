package store

import (
	"context"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/freeport"
)

// TestUnreachablePostgresIsAClearError: a store URL nobody answers fails
// at once with a message that names it, without its password.
func TestUnreachablePostgresIsAClearError(t *testing.T) {
	addr, err := freeport.Addr() // nobody listens there
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), "postgres://cumulus:s3cret@"+addr+"/cumulus?sslmode=disable", t.TempDir())
	if err == nil {
		t.Fatal("opening an unreachable store succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "cannot reach the PostgreSQL store") || !strings.Contains(msg, addr) {
		t.Errorf("error %q does not say which store is unreachable", msg)
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("error %q shows the password", msg)
	}
}

func TestOpenRefusesAnUnknownStore(t *testing.T) {
	if _, err := Open(context.Background(), "mysql://u:p@h/db", t.TempDir()); err == nil || strings.Contains(err.Error(), ":p@") {
		t.Errorf("unknown store: %v", err)
	}
}

func TestRebindLeavesLiteralsAlone(t *testing.T) {
	got := rebind(`SELECT a FROM t WHERE b = ? AND c = '?' AND d IN (?, ?)`)
	want := `SELECT a FROM t WHERE b = $1 AND c = '?' AND d IN ($2, $3)`
	if got != want {
		t.Errorf("rebind = %q, want %q", got, want)
	}
}
