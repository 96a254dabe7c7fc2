package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Signals between control-plane replicas that share one PostgreSQL store:
// PostgreSQL's NOTIFY and LISTEN. A signal is delivered to every
// connection listening on its channel when the sending statement commits;
// one sent while nobody listens is lost (a replica catches up by its
// periodic passes).

// errNoSignals: signals need PostgreSQL; a SQLite store has one process.
var errNoSignals = errors.New("signals between replicas need a PostgreSQL store")

// Notify sends payload on channel to every replica listening (Listen). A
// payload must stay under PostgreSQL's 8000 bytes.
func (s *DB) Notify(ctx context.Context, channel, payload string) error {
	if s.engine != postgresEngine {
		return errNoSignals
	}
	if _, err := s.W().ExecContext(ctx, `SELECT pg_notify(?, ?)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listen connects to the PostgreSQL store at dsn on a connection of its
// own, listens on channels and calls fn with each signal's channel and
// payload, until ctx ends or the connection breaks: it returns that error
// (ctx's error when ctx ended). Channels are identifiers the caller
// chooses (constants), not input.
func Listen(ctx context.Context, dsn string, channels []string, fn func(channel, payload string)) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("listen: connect to %s: %w", Redact(dsn), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen on %s: %w", ch, err)
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Channel, n.Payload)
	}
}
