package ui

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
)

// Browser sign-in. A person signs in with an API token (or through the
// one-time link `cumulus ui` prints); the server keeps a session in
// memory and gives the browser only a random session id in an HttpOnly,
// SameSite=Strict cookie. The bearer token never reaches the page, a URL
// or a log: the session remembers the token's hash, so a revoked or
// expired token ends its sessions at their next request.
const (
	// CookieName is the session cookie.
	CookieName = "cumulus_session"
	// CSRFHeader must carry the session's CSRF value on every
	// state-changing request authenticated by the cookie.
	CSRFHeader = "X-Cumulus-CSRF"
	// SessionTTL is how long a session lasts after sign-in.
	SessionTTL = 12 * time.Hour
	// CodeTTL is how long a one-time sign-in code is valid.
	CodeTTL = 60 * time.Second

	// MaxSessionsPerPrincipal bounds one principal's sessions: its next
	// sign-in ends its oldest session, never another principal's.
	MaxSessionsPerPrincipal = 20

	maxSessions = 10000
	maxCodes    = 1000
)

// session is one signed-in browser.
type session struct {
	tokenHash string // the API token it was opened with, hashed
	principal string // the token's name, for systemData
	csrf      string
	expires   time.Time
}

// code is a one-time sign-in code minted for `cumulus ui`, bound to the
// browser that asked for it (signinlink.go).
type code struct {
	tokenHash string
	binding   string
	expires   time.Time
}

// sessions holds sessions and codes by the hash of their secret, so a
// memory dump does not hand out usable cookies.
type sessions struct {
	mu       sync.Mutex
	sessions map[string]*session
	codes    map[string]code
}

func newSessions() *sessions {
	return &sessions{sessions: map[string]*session{}, codes: map[string]code{}}
}

// open starts a session for a token and returns the cookie value.
func (s *sessions) open(tokenHash, principal string, now time.Time) (id string, ses session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if s.countLocked(principal) >= MaxSessionsPerPrincipal {
		s.dropOldestLocked(principal)
	}
	if len(s.sessions) >= maxSessions {
		s.dropOldestLocked("")
	}
	id = secret.NewToken("cus_")
	ses = session{tokenHash: tokenHash, principal: principal, csrf: secret.NewToken(""), expires: now.Add(SessionTTL)}
	s.sessions[secret.Hash(id)] = &ses
	return id, ses
}

// get returns the live session of a cookie value.
func (s *sessions) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.sessions[secret.Hash(id)]
	if !ok {
		return session{}, false
	}
	if !now.Before(ses.expires) {
		delete(s.sessions, secret.Hash(id))
		return session{}, false
	}
	return *ses, true
}

// close ends a session.
func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, secret.Hash(id))
}

// mintCode makes a one-time sign-in code for a token, for the browser of
// binding.
func (s *sessions) mintCode(tokenHash, binding string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if len(s.codes) >= maxCodes {
		for k := range s.codes {
			delete(s.codes, k)
			break
		}
	}
	c := secret.NewToken("cuc_")
	s.codes[secret.Hash(c)] = code{tokenHash: tokenHash, binding: binding, expires: now.Add(CodeTTL)}
	return c
}

// redeem consumes a code: it works once, before it expires. It returns the
// code's token and binding.
func (s *sessions) redeem(c string, now time.Time) (tokenHash, binding string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := secret.Hash(c)
	e, ok := s.codes[k]
	delete(s.codes, k)
	if !ok || !now.Before(e.expires) {
		return "", "", false
	}
	return e.tokenHash, e.binding, true
}

func (s *sessions) sweepLocked(now time.Time) {
	for k, v := range s.sessions {
		if !now.Before(v.expires) {
			delete(s.sessions, k)
		}
	}
	for k, v := range s.codes {
		if !now.Before(v.expires) {
			delete(s.codes, k)
		}
	}
}

// countLocked counts a principal's sessions.
func (s *sessions) countLocked(principal string) int {
	n := 0
	for _, v := range s.sessions {
		if v.principal == principal {
			n++
		}
	}
	return n
}

// dropOldestLocked ends the oldest session of principal ("": of anyone).
func (s *sessions) dropOldestLocked(principal string) {
	var oldest string
	var at time.Time
	for k, v := range s.sessions {
		if principal != "" && v.principal != principal {
			continue
		}
		if oldest == "" || v.expires.Before(at) {
			oldest, at = k, v.expires
		}
	}
	delete(s.sessions, oldest)
}

// errTokenInvalid is why a token does not sign anyone in.
var errTokenInvalid = errors.New("token not valid")

// checkToken applies the API's token rules to a token's hash: it must
// exist, not be revoked and not have expired. It returns the token's name.
func (u *UI) checkToken(ctx context.Context, hash string) (string, error) {
	t, err := u.token(ctx, hash)
	return t.Name, err
}

// token reads a valid token by its hash (see checkToken).
func (u *UI) token(ctx context.Context, hash string) (Token, error) {
	t, err := u.o.Reads.TokenByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return Token{}, errTokenInvalid
	}
	if err != nil {
		return Token{}, fmt.Errorf("check token: %w", err)
	}
	if t.Revoked || (!t.Expires.IsZero() && !u.o.Clock.Now().Before(t.Expires)) {
		return Token{}, errTokenInvalid
	}
	return t, nil
}

// mayOpenSession is checkToken for a sign-in: the token's principal must
// also hold a role somewhere, or it gets no session (it could read nothing
// with one, and sessions are a bounded resource).
func (u *UI) mayOpenSession(ctx context.Context, hash string) (string, error) {
	t, err := u.token(ctx, hash)
	if err != nil {
		return "", err
	}
	if !t.HasRole {
		return "", &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: "principal '" + t.Name + "' holds no role anywhere, so the studio opens no session for it; an Owner grants one with 'cumulus auth role assign'"}
	}
	return t.Name, nil
}

// bearer checks a request's Authorization header, as the API does.
func (u *UI) bearer(r *http.Request) (tokenHash, principal string, err error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", "", unauthorized("send 'Authorization: Bearer <token>' (the CLI reads the token from config.yaml in the server's data dir, ~/.cumulus by default)")
	}
	hash := secret.Hash(tok)
	name, err := u.checkToken(r.Context(), hash)
	if errors.Is(err, errTokenInvalid) {
		return "", "", unauthorized("the bearer token is not valid")
	}
	return hash, name, err
}

// Session authenticates an API request by its session cookie; the server
// calls it for requests without an Authorization header. ok is false when
// the request carries no session cookie. A state-changing request (PUT,
// PATCH, POST, DELETE) must carry the session's CSRF value in the
// X-Cumulus-CSRF header, which a cross-site form or link cannot set.
func (u *UI) Session(r *http.Request) (principal string, ok bool, err error) {
	ses, ok, err := u.session(r)
	if !ok || err != nil {
		return "", ok, err
	}
	if !safeMethod(r.Method) && !csrfOK(r, ses) {
		return "", true, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: "a request signed in by the web session must carry the " + CSRFHeader + " header; reload the page"}
	}
	return ses.principal, true, nil
}

// session finds the request's live session and re-checks its token.
func (u *UI) session(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return session{}, false, nil
	}
	ses, ok := u.sessions.get(c.Value, u.o.Clock.Now())
	if !ok {
		return session{}, true, unauthorized("the web session expired or was signed out; sign in again")
	}
	if _, err := u.checkToken(r.Context(), ses.tokenHash); err != nil {
		if errors.Is(err, errTokenInvalid) {
			u.sessions.close(c.Value)
			return session{}, true, unauthorized("the token this web session was opened with is no longer valid; sign in again")
		}
		return session{}, true, err
	}
	return ses, true, nil
}

func csrfOK(r *http.Request, ses session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ses.csrf)) == 1
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func unauthorized(msg string) *api.Error {
	return &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: msg}
}
