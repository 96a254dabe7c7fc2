package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints of SQLite's write-ahead log, off the writer. By default the
// connection whose commit takes the log past 1,000 pages copies them into
// the database file at once, with two fsyncs, before its commit returns:
// under load that was the one writer, and every transaction grouped
// behind it waited out the copy and the disk (2.7 % of the server's CPU in
// a run of 5,000 busy nodes, and the fsyncs' wall time on top). The
// writer now never checkpoints on its own: a connection of the
// checkpointer's does, passively (it copies what no reader still needs and
// waits for nobody), at most every checkpointGap while commits come.
//
// A log is written again from its start only when, as a transaction
// begins, all of it is in the database file; a checkpoint running beside
// the writer rarely ends with nothing new behind it, so under steady
// writes the log would only grow. Once a checkpoint finds more than
// restartFrames in it, the writer copies the few pages written since
// itself after its next commit, and its next transaction starts the log
// anew.
type checkpointer struct {
	db      *sql.DB // a connection of its own
	kick    chan struct{}
	restart atomic.Bool // the log is long: the writer checkpoints after its next commit
	frames  int         // restartFrames
	stop    context.CancelFunc
	done    sync.WaitGroup
}

const (
	// checkpointGap is the least time between two of the checkpointer's
	// checkpoints: each costs two fsyncs however little it copies.
	checkpointGap = 100 * time.Millisecond
	// restartFrames is the log's length (pages; 4 KiB each) past which
	// the writer finishes a checkpoint itself, so the log starts anew.
	restartFrames = 4096
)

// newCheckpointer starts checkpointing the database at dsn, whose writer
// has wal_autocheckpoint(0).
func newCheckpointer(dsn string) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite checkpointer: %w", err)
	}
	db.SetMaxOpenConns(1)
	ctx, stop := context.WithCancel(context.Background())
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), frames: restartFrames, stop: stop}
	c.done.Add(1)
	go c.run(ctx)
	return c, nil
}

// committed tells the checkpointer that the writer committed, and runs
// the writer's own checkpoint when the log has grown long (w is the
// writer connection's pool; the caller holds the writer).
func (c *checkpointer) committed(ctx context.Context, w *sql.DB) {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
	if c.restart.CompareAndSwap(true, false) {
		if busy, _, _, err := checkpoint(ctx, w, "PASSIVE"); err != nil || busy {
			c.restart.Store(true) // the checkpointer's is under way: after the next commit
		}
	}
}

func (c *checkpointer) run(ctx context.Context) {
	defer c.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		c.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointGap):
		}
	}
}

// round is one checkpoint of the checkpointer's: when it finds the log
// long, or fails, the writer checkpoints after its next commit.
func (c *checkpointer) round(ctx context.Context) {
	if _, frames, _, err := checkpoint(ctx, c.db, "PASSIVE"); (err != nil && ctx.Err() == nil) || frames > c.frames {
		c.restart.Store(true)
	}
}

// close stops the checkpointer; the last connection to close checkpoints
// what is left.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.stop()
	c.done.Wait()
	return c.db.Close()
}

// checkpoint runs a checkpoint of the given mode (PASSIVE: it copies what
// no reader still needs and waits for nobody; TRUNCATE: it waits for the
// readers, copies the whole log and empties it) on db: busy when it could
// not do all of that, frames the pages in the log, copied those in the
// database file now.
func checkpoint(ctx context.Context, db *sql.DB, mode string) (busy bool, frames, copied int, err error) {
	var b int
	if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&b, &frames, &copied); err != nil {
		return false, 0, 0, fmt.Errorf("checkpoint: %w", err)
	}
	return b != 0, frames, copied, nil
}

// Checkpoint copies the whole write-ahead log into the database file now
// and empties it, waiting for the readers of older pages (SQLite; nothing
// on PostgreSQL): for a caller that wrote much at once and wants the copy
// done before what it does next, such as a benchmark that seeds its store.
func (s *DB) Checkpoint(ctx context.Context) error {
	if s.ckpt == nil {
		return nil
	}
	busy, frames, copied, err := checkpoint(ctx, s.ckpt.db, "TRUNCATE")
	if err != nil {
		return err
	}
	if busy {
		return fmt.Errorf("checkpoint: %d of the log's %d pages copied: a reader or writer held the rest", copied, frames)
	}
	return nil
}
