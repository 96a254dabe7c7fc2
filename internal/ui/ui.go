// Package ui is Cumulus's web studio: a page at / that shows and drives
// clusters, nodes and jobs. Its plain HTML, CSS and JavaScript are
// embedded in the binary (no build step). The page talks to the server
// only through the public ARM API, signed in by a session cookie; this
// package serves the page, the sign-in endpoints under /ui/, the session
// check the API server consults, a small history of each cluster's node
// counts for the page's chart, and a YAML reader for pasted job files.
package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

//go:embed assets
var assets embed.FS

// Options configure the studio.
type Options struct {
	// Reads is what the studio reads outside the public API (required).
	Reads Reads
	Clock clock.Clock
	Log   *slog.Logger
	// The names a local install starts with; the page opens on them.
	Subscription  string
	ResourceGroup string
	Workspace     string
	Location      string
	// PublicURL, when set, is the base of the sign-in links handed out;
	// otherwise the request's host.
	PublicURL string
	// SampleEvery is how often cluster node counts are sampled for the
	// chart (default 5 s); HistoryWindow how long samples are kept (6 h).
	SampleEvery   time.Duration
	HistoryWindow time.Duration
	// ConfigPath is the CLI config file `cumulus serve` writes its admin
	// token to. The sign-in page names it to browsers on this machine (a
	// path can name a user); others read "config.yaml in the server's
	// data directory". "" = ~/.cumulus/config.yaml.
	ConfigPath string
	// CanRead, when set, says whether a principal may read a resource
	// (the server's role assignments); the history endpoint asks it.
	CanRead func(ctx context.Context, principal, resource string) bool
}

// UI serves the studio. It is an http.Handler for "/" and "/ui/…", and
// its Session method authenticates API requests by session cookie.
type UI struct {
	o        Options
	log      *slog.Logger
	sessions *sessions
	history  *history
	files    map[string]asset
	mux      *http.ServeMux
}

type asset struct {
	body  []byte
	etag  string
	ctype string
}

// New builds the studio.
func New(o Options) *UI {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 5 * time.Second
	}
	if o.HistoryWindow <= 0 {
		o.HistoryWindow = 6 * time.Hour
	}
	if o.ConfigPath == "" {
		o.ConfigPath = "~/.cumulus/config.yaml"
	}
	u := &UI{o: o, log: o.Log.With("component", "ui"), sessions: newSessions(), history: newHistory(o.HistoryWindow),
		files: loadAssets()}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", u.index)
	m.HandleFunc("GET /ui/static/", u.static)
	m.HandleFunc("GET /ui/session", u.getSession)
	m.HandleFunc("POST /ui/login", u.login)
	m.HandleFunc("GET /ui/signin", u.signinHelp)
	m.HandleFunc("GET /ui/login", u.loginWithCode)
	m.HandleFunc("GET /ui/login/begin", u.beginSignIn)
	m.HandleFunc("POST /ui/logout", u.logout)
	m.HandleFunc("POST /ui/codes", u.newCode)
	m.HandleFunc("GET /ui/api/history", u.getHistory)
	m.HandleFunc("POST /ui/api/yaml", u.yamlToJSON)
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.writeError(w, r, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no studio page or endpoint at " + r.URL.Path})
	})
	u.mux = m
	return u
}

func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	u.mux.ServeHTTP(w, r)
}

func loadAssets() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "assets/")] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ct}
		return nil
	})
	if err != nil {
		panic("ui assets: " + err.Error()) // embedded at build time: cannot fail
	}
	return out
}

func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request, name, cache string) {
	a, ok := u.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.Header().Set("Etag", a.etag)
	w.Header().Set("Cache-Control", cache)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

func (u *UI) index(w http.ResponseWriter, r *http.Request) {
	u.serveAsset(w, r, "index.html", "no-cache")
}

func (u *UI) static(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/static/")
	if name == "index.html" || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	u.serveAsset(w, r, name, "no-cache")
}

// sessionInfo is what the page learns about its session: who is signed
// in, the CSRF value to send back, and where to start.
type sessionInfo struct {
	Principal     string    `json:"principal"`
	CSRF          string    `json:"csrf"`
	Expires       time.Time `json:"expires"`
	Subscription  string    `json:"subscription"`
	ResourceGroup string    `json:"resourceGroup"`
	Workspace     string    `json:"workspace"`
	Location      string    `json:"location"`
	CSRFHeader    string    `json:"csrfHeader"`
}

func (u *UI) info(s session) sessionInfo {
	return sessionInfo{Principal: s.principal, CSRF: s.csrf, Expires: s.expires, Subscription: u.o.Subscription,
		ResourceGroup: u.o.ResourceGroup, Workspace: u.o.Workspace, Location: u.o.Location, CSRFHeader: CSRFHeader}
}

func (u *UI) getSession(w http.ResponseWriter, r *http.Request) {
	ses, ok, err := u.session(r)
	if err == nil && !ok {
		err = unauthorized("not signed in")
	}
	if err != nil {
		u.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, u.info(ses))
}

// login signs in with an API token posted from the sign-in form.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		u.writeError(w, r, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "sign-in must come from the studio's own page"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		u.writeError(w, r, api.BadRequest(api.CodeInvalidRequest, "the sign-in form could not be read"))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" {
		u.writeError(w, r, &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidationError, Target: "token",
			Message: "enter an API token (the token line of " + u.configHint(r) + " on the server), or run 'cumulus ui'"})
		return
	}
	rr := r.Clone(r.Context())
	rr.Header.Set("Authorization", "Bearer "+tok)
	hash, name, err := u.bearer(rr)
	if err == nil {
		name, err = u.mayOpenSession(r.Context(), hash)
	}
	if err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
			e = &api.Error{Status: e.Status, Code: e.Code, Target: "token", Message: "this token is not valid: check that it is the token line of " + u.configHint(r) + " on the server, or run 'cumulus ui'"}
			err = e
		}
		u.writeError(w, r, err)
		return
	}
	ses := u.startSession(w, r, hash, name)
	u.log.Info("web session opened", "principal", name)
	writeJSON(w, http.StatusOK, u.info(ses))
}

// signinHelp tells the sign-in page where the server wrote its admin
// token, so the page names the right file whatever the data directory.
func (u *UI) signinHelp(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		ConfigPath string `json:"configPath"`
	}{u.configHint(r)})
}

// configHint names the file with the admin token: its path for a browser
// on the server's own machine (loopback, no public URL in front), else
// only where it is, since a path may name a user or a layout.
func (u *UI) configHint(r *http.Request) string {
	if u.o.PublicURL == "" && isLoopback(r.RemoteAddr) {
		return u.o.ConfigPath
	}
	return "config.yaml in the server's data directory"
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (u *UI) startSession(w http.ResponseWriter, r *http.Request, tokenHash, principal string) session {
	id, ses := u.sessions.open(tokenHash, principal, u.o.Clock.Now())
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: u.secure(r), MaxAge: int(SessionTTL.Seconds())})
	return ses
}

func (u *UI) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(u.o.PublicURL, "https://")
}

var codePage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("code").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · Cumulus</title>
{{if .OK}}<meta http-equiv="refresh" content="0;url=/">{{end}}
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><link rel="stylesheet" href="/ui/static/app.css"></head>
<body class="signin-page"><main class="signin-card"><h1>{{.Title}}</h1><p role="status">{{.Message}}</p>
<p><a href="/">Open the studio</a></p></main></body></html>
`))
})

// loginWithCode redeems the one-time link `cumulus ui` opens, in the
// browser it was bound to (signinlink.go). The answer is a page that moves
// on to the studio (not a redirect), so the browser sends the
// SameSite=Strict cookie on a same-site navigation.
func (u *UI) loginWithCode(w http.ResponseWriter, r *http.Request) {
	page := struct {
		OK             bool
		Title, Message string
	}{Title: "Sign-in link not valid",
		Message: "This sign-in link works once, within 60 seconds. Run 'cumulus ui' again, or sign in with a token."}
	status := http.StatusUnauthorized
	hash, binding, ok := u.sessions.redeem(r.URL.Query().Get("code"), u.o.Clock.Now())
	if ok && !boundBrowser(r, binding) {
		ok = false
		page.Title = "Sign-in link for another browser"
		page.Message = "This sign-in link was made for another browser, so it does not sign this one in. To sign in here, run 'cumulus ui' on this machine, or sign in with a token."
	}
	if ok {
		http.SetCookie(w, &http.Cookie{Name: BindingCookie, Value: "", Path: "/ui/login", HttpOnly: true, SameSite: http.SameSiteLaxMode,
			Secure: u.secure(r), MaxAge: -1})
		name, err := u.mayOpenSession(r.Context(), hash)
		var refused *api.Error
		switch {
		case errors.As(err, &refused):
			page.Title, page.Message, status = "No role", refused.Message, refused.Status
		case err == nil:
			u.startSession(w, r, hash, name)
			u.log.Info("web session opened with a sign-in link", "principal", name)
			page.OK, page.Title, page.Message, status = true, "Signed in", "Signed in; opening the studio…", http.StatusOK
		case !errors.Is(err, errTokenInvalid):
			u.log.Error("sign-in link", "err", err)
			status = http.StatusInternalServerError
			page.Message = "The server could not check the sign-in link; see its log."
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := codePage().Execute(w, page); err != nil {
		u.log.Debug("write sign-in page", "err", err)
	}
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		ses, ok := u.sessions.get(c.Value, u.o.Clock.Now())
		if ok && !csrfOK(r, ses) {
			u.writeError(w, r, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "sign-out must carry the " + CSRFHeader + " header"})
			return
		}
		u.sessions.close(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: u.secure(r), MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// codeView is the answer of POST /ui/codes.
type codeView struct {
	URL       string `json:"url"`
	Path      string `json:"path"`
	ExpiresIn int    `json:"expiresIn"`
}

// newCode mints a one-time sign-in link for the bearer token's owner.
func (u *UI) newCode(w http.ResponseWriter, r *http.Request) {
	hash, _, err := u.bearer(r)
	if err == nil {
		_, err = u.mayOpenSession(r.Context(), hash)
	}
	var req struct {
		Binding string `json:"binding"`
	}
	if err == nil {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		if derr := json.NewDecoder(r.Body).Decode(&req); derr != nil || !validBinding().MatchString(req.Binding) {
			err = &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidationError, Target: "binding",
				Message: "a sign-in link is bound to the browser that asked for it: send {\"binding\": …} as /ui/login/begin gave it (a 'cumulus ui' of this version does)"}
		}
	}
	if err != nil {
		u.writeError(w, r, err)
		return
	}
	c := u.sessions.mintCode(hash, req.Binding, u.o.Clock.Now())
	p := "/ui/login?code=" + url.QueryEscape(c)
	writeJSON(w, http.StatusOK, codeView{URL: u.baseURL(r) + p, Path: p, ExpiresIn: int(CodeTTL.Seconds())})
}

func (u *UI) baseURL(r *http.Request) string { return api.BaseURL(u.o.PublicURL, r) }

// getHistory answers GET /ui/api/history?compute=<ARM id>, with the
// samples of the last &seconds=N (default: all kept) or those taken after
// &after=<RFC 3339 time> (what a page already has).
func (u *UI) getHistory(w http.ResponseWriter, r *http.Request) {
	who := ""
	if sess, ok, err := u.session(r); err == nil && ok {
		who = sess.principal
	} else if _, p, berr := u.bearer(r); berr == nil {
		who = p
	} else {
		if err == nil {
			err = berr
		}
		u.writeError(w, r, err)
		return
	}
	id := r.URL.Query().Get("compute")
	if !strings.HasPrefix(id, "/subscriptions/") || !strings.Contains(strings.ToLower(id), "/computes/") {
		u.writeError(w, r, api.BadRequest(api.CodeBadRequest, "compute must be a compute's ARM id (/subscriptions/…/computes/NAME)"))
		return
	}
	if u.o.CanRead != nil && !u.o.CanRead(r.Context(), who, id) {
		u.writeError(w, r, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: "principal '" + who + "' may not read compute " + id})
		return
	}
	since := u.o.HistoryWindow
	if s := r.URL.Query().Get("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			u.writeError(w, r, api.BadRequest(api.CodeBadRequest, "seconds must be a positive integer"))
			return
		}
		since = min(time.Duration(n)*time.Second, since)
	}
	after := u.o.Clock.Now().Add(-since)
	if s := r.URL.Query().Get("after"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			u.writeError(w, r, api.BadRequest(api.CodeBadRequest, "after must be an RFC 3339 time, such as a sample's t"))
			return
		}
		if t.After(after) {
			after = t
		}
	}
	v, err := u.historyOf(r.Context(), id, after)
	if err != nil {
		u.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// sameOrigin refuses requests a browser marks as coming from another site.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		ou, err := url.Parse(o)
		if err != nil || !strings.EqualFold(ou.Host, r.Host) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// toAPIError maps an error to the ARM error the studio answers, as the
// API server does: a thing Reads did not find is a 404, an *api.Error
// keeps its status, anything else is a 500.
func toAPIError(err error) *api.Error {
	if errors.Is(err, ErrNotFound) {
		var e *api.Error
		if errors.As(err, &e) {
			return e
		}
		return api.NotFound("%s", err)
	}
	return api.AsError(err)
}

func (u *UI) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.Status >= 500 {
		u.log.Error("studio request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cumulus"`)
	}
	w.Header().Set("x-ms-error-code", e.Code)
	writeJSON(w, e.Status, api.ErrorResponse{Error: e})
}
