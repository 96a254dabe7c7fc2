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
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return InsertToken(ctx, q, t) }); own {
		return err
	}
	var exp int64
	if !t.Expires.IsZero() {
		exp = t.Expires.UnixMilli()
	}
	_, err := q.ExecContext(ctx, `INSERT INTO tokens (id, name, hash, role, created, expires) VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.Hash, t.Role, t.Created.UnixMilli(), exp)
	if err != nil {
		return fmt.Errorf("insert token: %w", err)
	}
	stored := tokenAsStored(t.ID, t.Name, t.Hash, t.Role, t.Created.UnixMilli(), exp, false)
	wrote(q, tokensOf, tokenChange{id: t.Hash, put: &stored})
	return nil
}

// tokenView holds the tokens as this process last wrote or read them, by
// hash (rowView): every API request authenticates its bearer token, and
// its read from SQL was a reader connection's fresh look into the WAL
// under a busy writer. A hash no token has is not held: each such request
// reads SQL.
type tokenView = rowView[Token]

type tokenChange = rowChange[Token]

// maxViewedTokens bounds the tokens the view holds.
const maxViewedTokens = 1 << 12

func newTokenView() *tokenView {
	return newRowView(func(t Token) Token { return t }, nil, maxViewedTokens)
}

// tokenAsStored is a token as a read of its row gives it.
func tokenAsStored(id, name, hash, role string, created, expires int64, revoked bool) Token {
	t := Token{ID: id, Name: name, Hash: hash, Role: role, Created: time.UnixMilli(created).UTC(), Revoked: revoked}
	if expires > 0 {
		t.Expires = time.UnixMilli(expires).UTC()
	}
	return t
}

// TokenByHash finds a token by the hash of its secret.
func TokenByHash(ctx context.Context, q Querier, hash string) (Token, error) {
	v := viewOf(q, tokensOf, hash)
	t, ok, from := v.held(hash)
	if ok {
		return t, nil
	}
	var id, name, stored, role string
	var created, expires, revoked int64
	err := q.QueryRowContext(ctx, `SELECT id, name, hash, role, created, expires, revoked FROM tokens WHERE hash = ?`, hash).
		Scan(&id, &name, &stored, &role, &created, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	t = tokenAsStored(id, name, stored, role, created, expires, revoked != 0)
	v.fill(hash, t, from)
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
