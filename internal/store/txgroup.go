package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Group commit of SQLite transactions. SQLite has one writer: a
// transaction that found the writer busy waited for the connection, and
// under load (64 API clients) most of a submit's wait was the hand-over of
// the connection from one goroutine to the next, each woken in turn by a
// busy scheduler (a write held the writer 0.25 ms at the median and its
// callers waited 10 ms for it). Now the transactions that arrive while one
// is being written wait in a queue, and the next writer runs all of them,
// one after another, in one transaction with one commit. Every caller
// returns after the commit that holds its work, as before.
//
// A caller's work stays its own: when any call of a batch fails (its fn
// returns an error or panics, or the commit fails), the batch is rolled
// back and every call of it is run again in a transaction of its own (Tx's
// fn may run more than once), so each gets its own outcome. No savepoints
// keep the calls apart: SQLite's cost of a savepoint around a long
// transaction (a pass's thousands of placements) grows with the square of
// its writes.

// maxTxBatch bounds the calls written in one transaction: every call of a
// batch waits for the whole batch.
const maxTxBatch = 64

// txCall is one caller of Tx.
type txCall struct {
	ctx      context.Context
	fn       func(Querier) error
	err      error
	panicked any // what fn panicked with, panicked again in its caller
}

// errPanicked stands for a panic of fn inside the transaction, which is
// rolled back; the panic goes on in the caller.
var errPanicked = errors.New("the transaction's function panicked")

// call runs the caller's fn on q, turning a panic into errPanicked.
func (c *txCall) call(q Querier) (err error) {
	c.panicked = nil
	defer func() {
		if p := recover(); p != nil {
			c.panicked = p
			err = errPanicked
		}
	}()
	return c.fn(q)
}

// groupTx is Tx on SQLite: fn is written alone when the writer is free,
// else with the transactions that queued meanwhile.
func (s *DB) groupTx(ctx context.Context, fn func(Querier) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	c := &txCall{ctx: ctx, fn: fn}
	s.group.Do(c, s.writeBatch)
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.err
}

// writeBatch writes the calls of a batch in one transaction, or, when
// there is one or any of them fails, each in a transaction of its own.
func (s *DB) writeBatch(batch []*txCall) {
	defer s.ckpt.committed(context.Background(), s.db)
	if len(batch) > 1 && s.w != nil && s.writeTxs(batch) { // s.w is nil while migrating
		return
	}
	for _, c := range batch {
		c.err = s.soloTx(c.ctx, c.call)
	}
}

// writeTxs writes a batch of calls in one transaction. It returns false,
// having kept nothing, when any of them failed.
func (s *DB) writeTxs(batch []*txCall) bool {
	obs := s.observer()
	start := time.Now()
	// The batch holds every caller's work: it is written even when the
	// caller who leads it goes away.
	ctx := context.WithoutCancel(batch[0].ctx)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	ts := &txStmts{tx: tx, cache: s.w, views: s.views}
	q := ts.querier(obs != nil)
	if err := s.checkFence(ctx, q); err != nil {
		_ = tx.Rollback()
		return false
	}
	for _, c := range batch {
		if c.ctx.Err() != nil || c.call(q) != nil {
			_ = tx.Rollback()
			return false
		}
	}
	ts.marking()
	err = tx.Commit()
	ts.committed(err)
	if err != nil {
		return false
	}
	for _, query := range ts.missed {
		s.w.prepare(ctx, query) // the writer is free again
	}
	if obs != nil {
		d := time.Since(start)
		for range batch {
			obs.TxDone(d, true)
		}
		for _, ch := range ts.changed {
			tell(obs, ch)
		}
	}
	return true
}
