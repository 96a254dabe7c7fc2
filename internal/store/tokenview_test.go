package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A token read by its hash is the token as stored (times in UTC to the
// millisecond), its revocation shows at once and a rolled-back one not at
// all; a hash no token has is not found, and not held.
func TestTokenReadsFollowCommittedWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	at := time.Date(2026, 11, 28, 9, 0, 0, 123456789, time.FixedZone("CET", 3600))
	tok := Token{ID: "t1", Name: "alice", Hash: "h1", Role: "User", Created: at, Expires: at.Add(time.Hour)}
	if err := db.Tx(ctx, func(q Querier) error { return InsertToken(ctx, q, tok) }); err != nil {
		t.Fatal(err)
	}
	want := Token{ID: "t1", Name: "alice", Hash: "h1", Role: "User",
		Created: at.UTC().Truncate(time.Millisecond), Expires: at.Add(time.Hour).UTC().Truncate(time.Millisecond)}
	for range 2 { // as written, then as held
		if got, err := TokenByHash(ctx, db.Q(), "h1"); err != nil || got != want {
			t.Fatalf("the token reads %+v (%v), want %+v", got, err, want)
		}
	}
	refused := errors.New("refused")
	if err := db.Tx(ctx, func(q Querier) error {
		if err := RevokeToken(ctx, q, "t1"); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("the rolled-back revocation returned %v", err)
	}
	if got, err := TokenByHash(ctx, db.Q(), "h1"); err != nil || got.Revoked {
		t.Fatalf("after a rolled-back revocation the token reads %+v (%v)", got, err)
	}
	if err := db.Tx(ctx, func(q Querier) error { return RevokeToken(ctx, q, "t1") }); err != nil {
		t.Fatal(err)
	}
	if got, err := TokenByHash(ctx, db.Q(), "h1"); err != nil || !got.Revoked {
		t.Fatalf("after its revocation the token reads %+v (%v), want it revoked", got, err)
	}
	if err := RevokeToken(ctx, db.W(), "t9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking a token that is not there: %v", err)
	}
	if _, err := TokenByHash(ctx, db.Q(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown hash reads %v", err)
	}
	if db.views != nil {
		if _, held := db.views.tokens.get("nope"); held {
			t.Fatal("the view holds a hash no token has")
		}
	}
}
