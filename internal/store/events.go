package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Event is one thing that happened to a compute or one of its nodes, kept
// in the history the events API pages through. Events are written in the
// transaction of the change they record, so the history never shows a
// change that did not happen, nor misses one that did. (A job's history
// is its statusHistory, kept in the job's own document.)
type Event struct {
	Seq     int64     `json:"-"`
	Time    time.Time `json:"time"`
	Compute string    `json:"-"` // the compute's key (lower case ARM id)
	Node    string    `json:"node,omitempty"`
	Type    string    `json:"type"`
	api.EventDetail
}

// AddEvent writes one event.
func AddEvent(ctx context.Context, q Querier, e Event) error {
	body, err := json.Marshal(e.EventDetail)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	_, err = q.ExecContext(ctx, `INSERT INTO events (time, compute, node, type, body) VALUES (?, ?, ?, ?, ?)`,
		e.Time.UnixMilli(), Key(e.Compute), e.Node, e.Type, string(body))
	if err != nil {
		return fmt.Errorf("add event %s: %w", e.Type, err)
	}
	return nil
}

// EventFilter selects a compute's events (its own and its nodes').
type EventFilter struct {
	Compute string   // compute key or ARM id
	Node    string   // only this node's
	Types   []string // only these types (any case)
	Since   time.Time
	Until   time.Time
	Before  int64 // only events older than this sequence number (paging); 0: none
	Limit   int   // at most this many (newest first); 0: 100
}

// Events reads events newest first.
func Events(ctx context.Context, q Querier, f EventFilter) ([]Event, error) {
	where, args := []string{"compute = ?"}, []any{Key(f.Compute)}
	if f.Node != "" {
		where, args = append(where, "node = ?"), append(args, f.Node)
	}
	if len(f.Types) > 0 {
		where = append(where, "lower(type) IN ("+placeholders(len(f.Types))+")")
		for _, t := range f.Types {
			args = append(args, strings.ToLower(t))
		}
	}
	if !f.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "time < ?"), append(args, f.Until.UnixMilli())
	}
	if f.Before > 0 {
		where, args = append(where, "seq < ?"), append(args, f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.QueryContext(ctx, `SELECT seq, time, compute, node, type, body FROM events WHERE `+
		strings.Join(where, " AND ")+` ORDER BY seq DESC LIMIT `+fmt.Sprint(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var ms int64
		var body string
		if err := rows.Scan(&e.Seq, &ms, &e.Compute, &e.Node, &e.Type, &body); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		e.Time = time.UnixMilli(ms).UTC()
		if err := json.Unmarshal([]byte(body), &e.EventDetail); err != nil {
			return nil, fmt.Errorf("decode event %d: %w", e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}

// DeleteEventsBefore removes events older than t, at most batch of them
// (so one call never holds the writer long), and says how many went.
func DeleteEventsBefore(ctx context.Context, q Querier, t time.Time, batch int) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE time < ? ORDER BY seq LIMIT ?)`,
		t.UnixMilli(), batch)
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return n, nil
}
