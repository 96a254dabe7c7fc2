package store

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// pausedStore opens a SQLite store whose checkpointer does not run by
// itself: the test checkpoints when it says so.
func pausedStore(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.ckpt.stop()
	s.ckpt.done.Wait()
	t.Cleanup(func() { s.Close() })
	if _, err := s.W().ExecContext(context.Background(), `CREATE TABLE filler (id INTEGER PRIMARY KEY, data BLOB NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// fillLog writes txs transactions of ten rows of 4 KiB each (about 12 pages
// of the log a transaction).
func fillLog(t *testing.T, s *DB, txs int) {
	t.Helper()
	data := make([]byte, 4096)
	for range txs {
		err := s.Tx(context.Background(), func(q Querier) error {
			for range 10 {
				rand.Read(data)
				if _, err := q.ExecContext(context.Background(), `INSERT INTO filler (data) VALUES (?)`, data); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func walPages(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size() / 4096
}

// logFrames is how many pages the log holds now (a passive checkpoint
// on a connection of the test's, which copies them too).
func logFrames(t *testing.T, s *DB) int {
	t.Helper()
	_, frames, _, err := checkpoint(context.Background(), s.ckpt.db, "PASSIVE")
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

func TestTheWriterLeavesCheckpointsToTheCheckpointer(t *testing.T) {
	s, path := pausedStore(t)
	fillLog(t, s, 250) // about 3,000 pages: past SQLite's 1,000 at which a writer checkpoints by default
	if n := walPages(t, path); n < 2500 {
		t.Fatalf("the log holds %d pages after ~3,000 written: the writer checkpointed it on a commit", n)
	}
	if got := logFrames(t, s); got < 2500 {
		t.Fatalf("the checkpointer found %d pages in the log, want the ~3,000 written", got)
	}
}

func TestALongLogStartsAnewAfterTheWritersCheckpoint(t *testing.T) {
	s, path := pausedStore(t)
	s.ckpt.frames = logFrames(t, s) + 200 // what the schema wrote, and 200 pages
	fillLog(t, s, 5)                      // ~60 pages
	s.ckpt.round(context.Background())
	if s.ckpt.restart.Load() {
		t.Fatal("a round of the checkpointer handed a short log to the writer")
	}
	fillLog(t, s, 50) // ~600 pages
	s.ckpt.round(context.Background())
	if !s.ckpt.restart.Load() {
		t.Fatal("a round of the checkpointer found a log of ~600 pages, longer than its limit, and did not hand it to the writer")
	}
	fillLog(t, s, 1) // the writer finishes the checkpoint after this commit...
	if s.ckpt.restart.Load() {
		t.Fatal("the writer did not take its turn to checkpoint")
	}
	fillLog(t, s, 1) // ...and this transaction writes the log from its start
	if frames := logFrames(t, s); frames > 40 {
		t.Fatalf("the log holds %d pages after the writer's checkpoint and one transaction: it did not start anew", frames)
	}
	before := walPages(t, path)
	fillLog(t, s, 20)
	if after := walPages(t, path); after > before {
		t.Fatalf("the log's file grew from %d to %d pages after it started anew with room to spare", before, after)
	}
}

// A store whose log has not been copied into its database file loses no
// committed write when its process dies: the log is the database's.
func TestWritesNotCheckpointedSurviveACrash(t *testing.T) {
	s, path := pausedStore(t)
	fillLog(t, s, 100)
	var want int
	if err := s.Q().QueryRowContext(context.Background(), `SELECT count(*) FROM filler`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	// The files as a process killed now would leave them (the store stays open).
	crashed := filepath.Join(t.TempDir(), "c.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err == nil {
			err = os.WriteFile(crashed+suffix, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenSQLite(context.Background(), crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got int
	if err := r.Q().QueryRowContext(context.Background(), `SELECT count(*) FROM filler`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want || want != 1000 {
		t.Fatalf("after the crash the store holds %d rows of the %d committed (want 1000)", got, want)
	}
}

func TestCheckpointEmptiesTheLog(t *testing.T) {
	s, path := pausedStore(t)
	fillLog(t, s, 20)
	if err := s.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := walPages(t, path); n != 0 {
		t.Fatalf("the log holds %d pages after Checkpoint, want none", n)
	}
	var rows int
	if err := s.Q().QueryRowContext(context.Background(), `SELECT count(*) FROM filler`).Scan(&rows); err != nil || rows != 200 {
		t.Fatalf("after Checkpoint the store reads %d rows (%v), want the 200 written", rows, err)
	}
}
