package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Statements are prepared once and reused by every path — transactions,
// single writes, reads — from many goroutines, without a deadlock on the
// one writer connection (a statement first met inside a transaction is
// prepared after its commit).
func TestStatementCacheSharedByAllPaths(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				j := queuedJob(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("job-%d-%d", g, i), 1, 0, "", "")
				err := db.Tx(ctx, func(q Querier) error {
					if err := InsertJob(ctx, q, j); err != nil {
						return err
					}
					_, err := GetJobByUID(ctx, q, j.UID)
					return err
				})
				if err == nil {
					j.Doc.Properties.Priority = i
					err = UpdateJob(ctx, db.W(), j)
				}
				if err == nil {
					_, err = QueuedJobs(ctx, db.Q(), "/c", 10)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the store stalled: a deadlock on the writer connection?")
	}
	jobs, _, err := QueuedDemand(ctx, db.Q(), "/c")
	if err != nil || jobs != 320 {
		t.Fatalf("%d queued jobs, %v; want 320", jobs, err)
	}
	for _, query := range []string{`SELECT coalesce(max(seq), 0) + 1 FROM jobs`, `SELECT ` + jobCols + ` FROM jobs WHERE uid = ?`} {
		if db.w.cached(query) == nil {
			t.Errorf("the writer did not keep %q prepared", query)
		}
	}
	if db.r.cached(`SELECT count(*), coalesce(sum(nodes), 0) FROM jobs WHERE compute = ? AND status = ?`) == nil {
		t.Error("the readers did not keep the demand query prepared")
	}
}

// A reader connection, once opened, is kept for the next read: opening
// one parses the schema and prepares its statements again, which under
// concurrent reads (nodes polling) was a quarter of the server's CPU.
func TestReaderConnectionsStayOpen(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	ctx := context.Background()
	for _, c := range allReaders(t, db) {
		c.Close()
	}
	for range 3 * readConns {
		if _, err := QueuedJobs(ctx, db.Q(), "/c", 10); err != nil {
			t.Fatal(err)
		}
	}
	st := db.ro.Stats()
	if st.MaxIdleClosed != 0 || st.OpenConnections != readConns {
		t.Fatalf("readers: %d connections closed for want of an idle slot, %d open; want 0 closed, %d open",
			st.MaxIdleClosed, st.OpenConnections, readConns)
	}
}

// Every reader connection maps the database file (its reads after another
// connection's commit come from the map); the writer, whose page cache
// lasts from one of its transactions to the next, does not.
func TestReadersMapTheFile(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	ctx := context.Background()
	for i, c := range allReaders(t, db) {
		var n int64
		if err := c.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != readerMmap {
			t.Errorf("reader connection %d maps %d bytes of the file, want %d", i, n, readerMmap)
		}
		c.Close()
	}
	var n int64
	if err := db.db.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the writer maps %d bytes of the file, want none", n)
	}
}

// allReaders holds every connection of db's readers' pool at once, each
// opened (a connection of the pool is opened when first handed out).
func allReaders(t *testing.T, db *DB) []*sql.Conn {
	t.Helper()
	ctx := context.Background()
	var conns []*sql.Conn
	for range readConns {
		c, err := db.ro.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}
