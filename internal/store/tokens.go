package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Token is an API bearer token as stored: only its SHA-256 hash is kept.
type Token struct {
	ID      string
	Name    string
	Hash    string
	Role    string
	Created time.Time
	Expires time.Time // zero: never
	Revoked bool
}

// InsertToken stores a token record.
func InsertToken(ctx context.Context, q Querier, t Token) error {
	var exp int64
	if !t.Expires.IsZero() {
		exp = t.Expires.UnixMilli()
	}
	_, err := q.ExecContext(ctx, `INSERT INTO tokens (id, name, hash, role, created, expires) VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.Hash, t.Role, t.Created.UnixMilli(), exp)
	if err != nil {
		return fmt.Errorf("insert token: %w", err)
	}
	return nil
}

// TokenByHash finds a token by the hash of its secret.
func TokenByHash(ctx context.Context, q Querier, hash string) (Token, error) {
	var t Token
	var created, expires, revoked int64
	err := q.QueryRowContext(ctx, `SELECT id, name, hash, role, created, expires, revoked FROM tokens WHERE hash = ?`, hash).
		Scan(&t.ID, &t.Name, &t.Hash, &t.Role, &created, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("token: %w", err)
	}
	t.Created = time.UnixMilli(created).UTC()
	if expires > 0 {
		t.Expires = time.UnixMilli(expires).UTC()
	}
	t.Revoked = revoked != 0
	return t, nil
}

// CountTokens counts stored tokens (zero on a fresh store).
func CountTokens(ctx context.Context, q Querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM tokens`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

// PutSecret stores a sealed secret under id, replacing any earlier one.
func PutSecret(ctx context.Context, q Querier, id string, sealed []byte) error {
	_, err := q.ExecContext(ctx, `INSERT INTO secrets (id, sealed) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed`, Key(id), sealed)
	if err != nil {
		return fmt.Errorf("put secret: %w", err)
	}
	return nil
}

// GetSecret reads a sealed secret; ErrNotFound when there is none.
func GetSecret(ctx context.Context, q Querier, id string) ([]byte, error) {
	var b []byte
	err := q.QueryRowContext(ctx, `SELECT sealed FROM secrets WHERE id = ?`, Key(id)).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("secret: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	return b, nil
}

// DeleteSecret removes a secret if present.
func DeleteSecret(ctx context.Context, q Querier, id string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM secrets WHERE id = ?`, Key(id)); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	return nil
}
