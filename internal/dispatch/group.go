package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// group commits the job states that agents report concurrently: the
// reports that arrive while a transaction is being written wait, and the
// next transaction writes all of them (group commit). Every caller still
// returns only after its report is committed, so an answered report is
// never lost; what is saved is a transaction, a commit and its WAL write
// per report (with thousands of nodes, most of a report's cost).
type group struct {
	mu    sync.Mutex
	queue []*report
	busy  bool // a caller is writing a batch
}

// report is one caller's states, waiting for a batch to write them.
type report struct {
	node   string
	states []agentapi.JobState
	outs   []Outcome
	err    error
	// ready is told true when the report was written (or failed), false
	// when its caller is to write the next batch.
	ready chan bool
}

// ReportAll records the phases an agent reports for its jobs, in one
// transaction with other agents' concurrent reports.
func (s *Service) ReportAll(ctx context.Context, nodeID string, states []agentapi.JobState) error {
	if len(states) == 0 {
		return nil
	}
	r := &report{node: nodeID, states: states, ready: make(chan bool, 1)}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, r)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		// No giving up on ctx here: the report may be asked to write the
		// next batch, which other callers wait for.
		lead = !<-r.ready
	}
	if lead {
		s.lead(ctx, r)
	}
	if r.err != nil {
		return r.err
	}
	for _, out := range r.outs {
		if out.Changed {
			s.changed()
			s.wake(out.Wake)
		}
	}
	return nil
}

// lead writes the reports queued now (r's among them) in one batch, then
// hands the writing on to the first report queued meanwhile and tells the
// batch's other callers theirs is done. A panic while writing fails the
// batch's reports and still hands on, so no caller waits for ever.
func (s *Service) lead(ctx context.Context, r *report) {
	g := &s.group
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	defer func() {
		p := recover()
		g.mu.Lock()
		if len(g.queue) > 0 {
			g.queue[0].ready <- false // it writes the next batch
		} else {
			g.busy = false
		}
		g.mu.Unlock()
		for _, o := range batch {
			if p != nil {
				o.err = fmt.Errorf("write job reports: %v", p)
			}
			if o != r {
				o.ready <- true
			}
		}
		if p != nil {
			panic(p)
		}
	}()
	// The batch holds other callers' reports: it is written even when
	// this caller goes away.
	s.writeBatch(context.WithoutCancel(ctx), batch)
}

// writeBatch writes every report of the batch in one transaction. When
// one of them fails, none is kept from it: each report is written again
// in a transaction of its own, so that one report's error is its own.
func (s *Service) writeBatch(ctx context.Context, batch []*report) {
	// Ended on return, a panic's too: an open transaction is rolled back
	// when its context ends, so the writer is never left held.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	now := s.now()
	err := s.DB.Tx(ctx, func(q store.Querier) error {
		for _, r := range batch {
			r.outs = make([]Outcome, len(r.states)) // a retried transaction starts again
			for i, st := range r.states {
				out, err := ApplyJobState(ctx, q, r.node, st, s.Retries, now)
				if err != nil {
					return err
				}
				r.outs[i] = out
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	for _, r := range batch {
		r.outs = make([]Outcome, len(r.states))
		for i, st := range r.states {
			if r.outs[i], r.err = s.reportAlone(ctx, r.node, st); r.err != nil {
				break
			}
		}
	}
}

// reportAlone writes one report in its own transaction, reading again when
// another writer changed the job in between.
func (s *Service) reportAlone(ctx context.Context, nodeID string, st agentapi.JobState) (Outcome, error) {
	for {
		var out Outcome
		err := s.DB.Tx(ctx, func(q store.Querier) error {
			var err error
			out, err = ApplyJobState(ctx, q, nodeID, st, s.Retries, s.now())
			return err
		})
		if errors.Is(err, store.ErrETagMismatch) {
			continue // raced with another writer: read again
		}
		if err != nil {
			return out, fmt.Errorf("job %s on node %s: %w", st.UID, nodeID, err)
		}
		return out, nil
	}
}
