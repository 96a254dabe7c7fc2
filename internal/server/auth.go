package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// RoleOwner is the role of the admin token made at first start.
const RoleOwner = "Owner"

func unauthorized(msg string) *api.Error {
	return &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: msg}
}

type principalKey struct{}

// authenticate checks the bearer token and returns an ARM error if it is
// missing, unknown, revoked or expired.
func (s *Server) authenticate(r *http.Request) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		return unauthorized("the request has no Authorization header; send 'Authorization: Bearer <token>' (the CLI reads the token from config.yaml in the server's data dir, ~/.cumulus by default)")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !wellFormedToken(tok) {
		return unauthorized("the Authorization header must be 'Bearer <token>'")
	}
	t, err := store.TokenByHash(r.Context(), s.db.Q(), secret.Hash(tok))
	if errors.Is(err, store.ErrNotFound) {
		return unauthorized("the bearer token is not valid")
	}
	if err != nil {
		return err
	}
	if t.Revoked {
		return unauthorized("the bearer token was revoked")
	}
	if !t.Expires.IsZero() && !s.clock.Now().Before(t.Expires) {
		return unauthorized("the bearer token expired at " + t.Expires.Format("2006-01-02T15:04:05Z"))
	}
	*r = *r.WithContext(context.WithValue(r.Context(), principalKey{}, t.Name))
	return nil
}

// maxTokenLen bounds a bearer token; Cumulus's own are under 100 bytes.
const maxTokenLen = 4096

// wellFormedToken reports whether tok can be a bearer token: 1 to
// maxTokenLen visible ASCII characters, no spaces (RFC 6750's token68 is
// narrower still). Control bytes never get here: net/http refuses a
// header value with them before any handler runs, with a plain-text 400.
func wellFormedToken(tok string) bool {
	if tok == "" || len(tok) > maxTokenLen {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// principal is the name of the caller, for systemData.
func principal(r *http.Request) string {
	if p, ok := r.Context().Value(principalKey{}).(string); ok {
		return p
	}
	return "unknown"
}

// EnsureAdminToken creates the admin token on a fresh store and returns
// it; on a store that has tokens it returns "" (the secret is not kept).
func EnsureAdminToken(ctx context.Context, db *store.DB, now time.Time) (string, error) {
	n, err := store.CountTokens(ctx, db.Q())
	if err != nil {
		return "", err
	}
	if n > 0 {
		return "", nil
	}
	return MintAdminToken(ctx, db, now)
}

// MintAdminToken stores a new token of the admin principal, an Owner of
// everything, and returns its secret.
func MintAdminToken(ctx context.Context, db *store.DB, now time.Time) (string, error) {
	tok := secret.NewToken("cml_")
	rec := store.Token{ID: secret.NewID(), Name: "admin", Role: RoleOwner, Hash: secret.Hash(tok), Created: now}
	err := db.Tx(ctx, func(q store.Querier) error {
		if err := store.PutPrincipal(ctx, q, store.Principal{Name: "admin", Kind: "User", Created: now}); err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
		as, err := store.RoleAssignments(ctx, q, "admin")
		if err != nil {
			return err
		}
		if len(as) == 0 {
			if err := store.PutRoleAssignment(ctx, q, store.RoleAssignment{ID: "admin-owner", Principal: "admin", Role: RoleOwner, Scope: "/", Created: now}); err != nil {
				return err
			}
		}
		return store.InsertToken(ctx, q, rec)
	})
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}
