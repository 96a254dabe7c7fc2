package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browserScript is a stand-in browser for `cumulus ui` ($BROWSER): curl
// with a cookie jar, following redirects, as a browser would.
func browserScript(t *testing.T) (script, jar string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl to stand in for a browser")
	}
	dir := t.TempDir()
	script, jar = filepath.Join(dir, "browser"), filepath.Join(dir, "jar")
	body := "#!/bin/sh\ncurl -s -L -c " + jar + ".tmp -b " + jar + ".tmp -o " + filepath.Join(dir, "page") + " \"$1\"\nmv " + jar + ".tmp " + jar + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, jar
}

// TestUISignsInTheBrowserItOpened runs `cumulus ui` against an in-process
// control plane with a browser that follows what it is sent: the browser
// ends up signed in.
func TestUISignsInTheBrowserItOpened(t *testing.T) {
	d, cfg := startDaemon(t, nil)
	script, jar := browserScript(t)
	t.Setenv("BROWSER", script)
	out, errOut, code := run(t, "--config", cfg, "ui")
	if code != 0 || !strings.Contains(errOut, "Signed the browser in") {
		t.Fatalf("ui: exit %d, %q, %q", code, out, errOut)
	}
	// The browser (a process of its own) writes its cookies when it is done.
	var b []byte
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err = os.ReadFile(jar); err == nil {
			break
		}
	}
	if err != nil || !strings.Contains(string(b), "cumulus_session") || strings.Contains(string(b), d.Token) {
		t.Fatalf("the browser's cookies: %v\n%s", err, b)
	}
}

// uiSignIn runs `cumulus ui` with args, reads the sign-in address it
// prints and opens it as a browser would (a cookie jar, redirects
// followed). It returns the address, what the command wrote on stderr,
// whether the browser ended up signed in, and the one-time link the
// browser went through.
func uiSignIn(t *testing.T, serverURL, cfg string, args ...string) (addr, stderr string, signedIn bool, link string) {
	t.Helper()
	pr, pw := io.Pipe()
	errc := make(chan string, 1)
	go func() {
		var errb bytes.Buffer
		Main(context.Background(), append([]string{"--config", cfg, "ui"}, args...), pw, &errb)
		pw.Close()
		errc <- errb.String()
	}()
	stdout := bufio.NewReader(pr)
	addr, err := stdout.ReadString('\n') // printed as soon as there is no browser to open
	if err != nil {
		t.Fatalf("ui printed no address: %v; stderr %q", err, <-errc)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	addr = strings.TrimSpace(addr)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if strings.Contains(r.URL.RawQuery, "code=") {
			link = r.URL.String()
		}
		return nil
	}}
	res, err := browser.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(serverURL)
	for _, c := range jar.Cookies(u) {
		signedIn = signedIn || c.Name == "cumulus_session"
	}
	return addr, <-errc, signedIn && res.StatusCode == 200, link
}

// With --print-url the sign-in address is printed: a browser that opens it
// is signed in; the one-time link it is sent to signs in no other browser.
// Without a browser to open (none set, a launcher that fails, no display)
// the command says why and prints the same address.
func TestUIPrintURL(t *testing.T) {
	d, cfg := startDaemon(t, nil)
	addr, errOut, signedIn, link := uiSignIn(t, d.URL, cfg, "--print-url")
	if !strings.HasPrefix(addr, d.URL+"/ui/login/begin?") || strings.Contains(addr, d.Token) {
		t.Fatalf("printed %q", addr)
	}
	if !signedIn || link == "" || !strings.Contains(errOut, "Signed the browser in") {
		t.Fatalf("the browser: signed in %v, link %q; stderr %q", signedIn, link, errOut)
	}
	// The link, replayed in another browser, signs nothing in.
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "cumulus_session" {
			t.Fatal("the link signed another browser in")
		}
	}

	bin := t.TempDir()
	failing := filepath.Join(bin, "failing-browser")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'no method available for opening' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opener := filepath.Join(bin, "xdg-open")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, browser, display, want string
	}{
		{"no browser", "/nonexistent/browser", ":0", "Could not open a browser"},
		{"a launcher that fails (no browser behind it)", failing, ":0", "Could not open a browser"},
		// On a machine without a display (an SSH session), an installed
		// xdg-open that would start does not mean a browser opened.
		{"no display", "", "", "no graphical display"},
	} {
		t.Setenv("BROWSER", c.browser)
		t.Setenv("DISPLAY", c.display)
		t.Setenv("WAYLAND_DISPLAY", "")
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		addr, errOut, signedIn, _ := uiSignIn(t, d.URL, cfg)
		if !strings.HasPrefix(addr, d.URL+"/ui/login/begin?") || !strings.Contains(errOut, c.want) || !signedIn {
			t.Errorf("ui with %s: address %q, signed in %v, stderr %q", c.what, addr, signedIn, errOut)
		}
	}
}
