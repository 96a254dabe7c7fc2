package ui

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
)

// A one-time sign-in link signs in only the browser that asked for it, so
// that a link someone else made cannot sign a victim's browser in as its
// maker (login CSRF). `cumulus ui` listens on a loopback port and opens
// the browser at /ui/login/begin?port=P&state=S; the server gives that
// browser a random binding cookie and sends it on to
// http://127.0.0.1:P/callback with the cookie's hash (the binding) and S;
// the CLI, which alone learns the binding, mints a code bound to it
// (POST /ui/codes {"binding": …}) and sends the browser on to
// /ui/login?code=…, which signs in only a browser whose binding cookie
// hashes to the code's binding. (As with any loopback redirect, another
// user of the same machine who listens on that port could take part.)

// BindingCookie is the cookie that ties a browser to the sign-in link it
// asked for. It is SameSite=Lax: the link comes back to the studio from
// the CLI's loopback page, another site.
const BindingCookie = "cumulus_signin"

// stateRE is what a CLI's state may be: what `cumulus ui` makes.
var stateRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`) })

// beginSignIn gives the browser its binding cookie and sends it on to the
// CLI's loopback port with the binding.
func (u *UI) beginSignIn(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	port, err := strconv.Atoi(q.Get("port"))
	if err != nil || port < 1 || port > 65535 || !stateRE().MatchString(q.Get("state")) {
		u.writeError(w, r, api.BadRequest(api.CodeBadRequest, "this sign-in address is not one 'cumulus ui' makes; run 'cumulus ui' again"))
		return
	}
	nonce := secret.NewToken("")
	http.SetCookie(w, &http.Cookie{Name: BindingCookie, Value: nonce, Path: "/ui/login", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: u.secure(r), MaxAge: int(2 * CodeTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	back := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port), Path: "/callback",
		RawQuery: url.Values{"state": {q.Get("state")}, "binding": {secret.Hash(nonce)}}.Encode()}
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// boundBrowser says whether r comes from the browser a code was bound to.
func boundBrowser(r *http.Request, binding string) bool {
	c, err := r.Cookie(BindingCookie)
	if err != nil || c.Value == "" || binding == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(secret.Hash(c.Value)), []byte(binding)) == 1
}

// validBinding is what a binding looks like (a hash from beginSignIn).
var validBinding = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
