package pgtest_test

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestDSNRoundTrip(t *testing.T) {
	dsn := pgtest.DSN(t)
	if !strings.HasPrefix(dsn, "postgres://") {
		t.Fatalf("DSN = %q, want postgres://…", dsn)
	}
	db := open(t, dsn)
	if _, err := db.Exec(`CREATE TABLE jobs (id text PRIMARY KEY, n integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO jobs (id, n) VALUES ($1, $2), ($3, $4)`, "b", 2, "a", 1); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT id, n FROM jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+"="+string(rune('0'+n)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a=1,b=2" {
		t.Fatalf("rows = %v, want [a=1 b=2]", got)
	}
}

// Two DSNs are two databases: a table made in one is not in the other, and
// each is dropped when its test ends.
func TestDSNIsolated(t *testing.T) {
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two DSN calls gave the same database %q", a)
	}
	dbA, dbB := open(t, a), open(t, b)
	if _, err := dbA.Exec(`CREATE TABLE only_in_a (x integer)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := dbB.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_in_a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table made in one database is visible in the other")
	}
}

// A database is dropped when its test ends, even with a connection still
// open to it.
func TestDSNDroppedAfterTest(t *testing.T) {
	var name string
	var db *sql.DB
	t.Run("inner", func(t *testing.T) {
		var err error
		if db, err = sql.Open("pgx", pgtest.DSN(t)); err != nil {
			t.Fatal(err)
		}
		db.SetMaxIdleConns(1)
		if err := db.QueryRow(`SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		// db stays open, its connection idle: the drop must force it.
	})
	defer db.Close()
	admin := open(t, pgtest.Server(t))
	var n int
	if err := admin.QueryRow(`SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if name == "" || n != 0 {
		t.Fatalf("database %q still exists after its test ended (count %d)", name, n)
	}
}
