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
// ends up signed in, and the code it got works in no other browser.
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

// With --print-url the sign-in address is printed: a browser that opens it
// is signed in; the one-time link it is sent to signs in no other browser.
func TestUIPrintURL(t *testing.T) {
	d, cfg := startDaemon(t, nil)
	pr, pw := io.Pipe()
	errc := make(chan string, 1)
	go func() {
		var errb bytes.Buffer
		Main(context.Background(), []string{"--config", cfg, "ui", "--print-url"}, pw, &errb)
		pw.Close()
		errc <- errb.String()
	}()
	// The printed address, read as it comes (the command waits for a browser).
	stdout := bufio.NewReader(pr)
	begin, err := stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	begin = strings.TrimSpace(begin)
	if !strings.HasPrefix(begin, d.URL+"/ui/login/begin?") || strings.Contains(begin, d.Token) {
		t.Fatalf("printed %q", begin)
	}
	jar, _ := cookiejar.New(nil)
	var link string
	browser := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if strings.Contains(r.URL.RawQuery, "code=") {
			link = r.URL.String()
		}
		return nil
	}}
	res, err := browser.Get(begin)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(d.URL)
	signedIn := false
	for _, c := range jar.Cookies(u) {
		signedIn = signedIn || c.Name == "cumulus_session"
	}
	if res.StatusCode != 200 || !signedIn || link == "" {
		t.Fatalf("the browser: %d, signed in %v, link %q", res.StatusCode, signedIn, link)
	}
	if got := <-errc; !strings.Contains(got, "Signed the browser in") {
		t.Fatalf("ui --print-url: %q", got)
	}
	// The link, replayed in another browser, signs nothing in.
	res, err = http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "cumulus_session" {
			t.Fatal("the link signed another browser in")
		}
	}
}
