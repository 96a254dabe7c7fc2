package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Agents' reports are written in batches (batch.Group): the reports that
// arrive while a transaction is being written wait, and the next
// transaction writes all of them, however many (group commit). Every
// caller still returns only after its report is committed, so an answered
// report is never lost; what is saved is a transaction, a commit and its
// WAL write per report (with thousands of nodes, most of a report's cost).
// The batch is one transaction, not one per report as the store's own
// group commit would make it: its size is not bounded, and a report that
// fails is rewritten alone without rewriting the others.

// report is one caller's states, waiting for a batch to write them.
type report struct {
	node   string
	states []agentapi.JobState
	outs   []Outcome
	err    error
}

// ReportAll records the phases an agent reports for its jobs, in one
// transaction with other agents' concurrent reports.
func (s *Service) ReportAll(ctx context.Context, nodeID string, states []agentapi.JobState) error {
	if len(states) == 0 {
		return nil
	}
	r := &report{node: nodeID, states: states}
	// The batch holds other callers' reports: it is written even when
	// this caller goes away.
	s.group.Do(r, func(batch []*report) { s.writeReports(context.WithoutCancel(ctx), batch) })
	if r.err != nil {
		return r.err
	}
	for i, out := range r.outs {
		if out.Changed {
			s.changed()
			s.wake(out.Wake)
		}
		if out.Rows && s.RowsExited != nil {
			s.RowsExited(ctx, states[i].UID)
		}
	}
	return nil
}

// writeReports writes a batch; a panic while writing fails the batch's
// reports (and goes on in the caller that wrote).
func (s *Service) writeReports(ctx context.Context, batch []*report) {
	defer func() {
		if p := recover(); p != nil {
			for _, o := range batch {
				o.err = fmt.Errorf("write job reports: %v", p)
			}
			panic(p)
		}
	}()
	s.writeBatch(ctx, batch)
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
