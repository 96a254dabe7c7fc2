package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestServesTheStudio checks the daemon's wiring of the web studio: the
// page at /, sign-in links, the session cookie on the API, and the
// history sampler.
func TestServesTheStudio(t *testing.T) {
	d := start(t, options(t, t.TempDir()))
	defer stop(t, d)
	resp, err := http.Get(d.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Cumulus studio") {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}

	// `cumulus ui`'s sign-in: the browser starts it and gets its binding,
	// the CLI mints a link bound to it, the browser opens the link.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = browser.Get(d.URL + "/ui/login/begin?port=45678&state=state-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("begin: %d %v", resp.StatusCode, err)
	}
	req, _ := http.NewRequest("POST", d.URL+"/ui/codes", strings.NewReader(`{"binding":"`+loc.Query().Get("binding")+`"}`))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var link struct{ Path string }
	_ = json.NewDecoder(resp.Body).Decode(&link)
	resp.Body.Close()
	if resp.StatusCode != 200 || link.Path == "" {
		t.Fatalf("POST /ui/codes: %d", resp.StatusCode)
	}
	resp, err = browser.Get(d.URL + link.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "cumulus_session" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("sign-in link: %d, no cookie", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", d.URL+dWSPath+"/computes?api-version=2024-04-01", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("API with the session cookie: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", d.URL+"/ui/api/history?compute="+dWSPath+"/computes/none", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("history: %d", resp.StatusCode)
	}
}
