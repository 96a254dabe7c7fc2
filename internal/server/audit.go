package server

import (
	"context"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The audit log records every write: a committed one in the write's own
// transaction (s.tx), so that no write is committed without its entry, and
// a refused or failed one after the answer (s.audit). Neither uses a
// context the client can cancel: a client that hangs up mid-request
// cannot take the entry with it.

type auditKey struct{}

// auditState is what a write request's audit entry has so far.
type auditState struct {
	// resource and operation override the request's path and the
	// operation named after it (a blob upload is recorded under its
	// workspace).
	resource, operation string
	seq                 int64 // the entry a committed transaction wrote; 0 before
	status              int   // the status seq was written with
	// answer is the success the handler will answer with, when it knows
	// it inside its transaction (answering): the entry is written with it,
	// not corrected by a second write after the answer.
	answer int
}

// answering tells the audit entry of the request's transaction the
// success status the handler is about to answer with (201 for a create).
func answering(r *http.Request, status int) {
	if st := auditOf(r); st != nil {
		st.answer = status
	}
}

// withAudit gives a write request its audit state; reads have none.
func withAudit(r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	*r = *r.WithContext(context.WithValue(r.Context(), auditKey{}, &auditState{}))
}

func auditOf(r *http.Request) *auditState {
	st, _ := r.Context().Value(auditKey{}).(*auditState)
	return st
}

// auditAs records the request under another resource and operation.
func auditAs(r *http.Request, resource, operation string) {
	if st := auditOf(r); st != nil {
		st.resource, st.operation = resource, operation
	}
}

// success is the status a committed write is recorded with.
func (st *auditState) success() int {
	if st.answer != 0 {
		return st.answer
	}
	return http.StatusOK
}

func (s *Server) auditEntry(r *http.Request, st *auditState, status int) store.AuditEntry {
	e := store.AuditEntry{Time: s.clock.Now().UTC(), Principal: principal(r), Operation: rbac.OperationName(r.Method, r.URL.Path),
		Resource: r.URL.Path, Status: status}
	if st != nil && st.resource != "" {
		e.Resource, e.Operation = st.resource, st.operation
	}
	return e
}

// tx runs a write request's transaction with the request's audit entry
// in it. The transaction runs under a context the client cannot cancel: a
// write that has begun is either committed with its entry or not at all
// (fn's own statements may still use the request's context; if they fail,
// nothing is committed). Several transactions of one request share one
// entry, written by the first that commits. A lock that forbids the
// request refuses it here too (guardLocks), not only before the handler.
func (s *Server) tx(r *http.Request, fn func(q store.Querier) error) error {
	ctx := context.WithoutCancel(r.Context())
	st := auditOf(r)
	var seq int64
	err := s.db.Tx(ctx, func(q store.Querier) error {
		if err := s.guardLocks(r, q); err != nil {
			return err
		}
		if err := fn(q); err != nil {
			return err
		}
		if st == nil || st.seq != 0 {
			return nil
		}
		var err error
		seq, err = store.AppendAudit(ctx, q, s.auditEntry(r, st, st.success()))
		return err
	})
	if err == nil && seq != 0 {
		st.seq, st.status = seq, st.success()
	}
	return err
}

// audit records a write request once it is answered: a refused or failed
// one (a new entry), or the final status of one whose transaction
// committed (its entry, when the answer is a success other than 200).
// Reads and unauthenticated requests are not recorded.
func (s *Server) audit(r *http.Request, status int) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || status == http.StatusUnauthorized {
		return
	}
	ctx := context.WithoutCancel(r.Context())
	st := auditOf(r)
	if st != nil && st.seq != 0 {
		if status == st.status || status < 200 || status > 299 {
			return // a failure after the commit: the write happened, keep its success
		}
		if err := store.SetAuditStatus(ctx, s.db.W(), st.seq, status); err != nil {
			s.log.Error("audit status not recorded", "seq", st.seq, "status", status, "err", err)
			return
		}
		st.status = status
		return
	}
	e := s.auditEntry(r, st, status)
	if _, err := store.AppendAudit(ctx, s.db.W(), e); err != nil {
		s.log.Error("audit record lost", "operation", e.Operation, "resource", e.Resource, "err", err)
	}
}
