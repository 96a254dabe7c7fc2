package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestUIPrintsAOneTimeSignInLink runs `cumulus ui --print-url` against an
// in-process control plane and follows the link like a browser.
func TestUIPrintsAOneTimeSignInLink(t *testing.T) {
	d, cfg := startDaemon(t, nil)

	out, errOut, code := run(t, "--config", cfg, "ui", "--print-url")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, d.URL+"/ui/login?code=cuc_") || strings.Contains(link, d.Token) {
		t.Fatalf("ui --print-url: exit %d, %q, %q", code, out, errOut)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "cumulus_session" {
			session = c
		}
	}
	if resp.StatusCode != 200 || session == nil {
		t.Fatalf("following the link: %d, cookie %v", resp.StatusCode, session)
	}
	if resp, err := http.Get(link); err != nil || resp.StatusCode != 401 {
		t.Fatalf("the link works once: %v %v", resp, err)
	}

	// Without a browser to open, it prints the link and says why.
	t.Setenv("BROWSER", "/nonexistent/browser")
	out, errOut, code = run(t, "--config", cfg, "ui")
	if code != 0 || !strings.Contains(out, "/ui/login?code=") || !strings.Contains(errOut, "Could not open a browser") {
		t.Fatalf("ui without a browser: exit %d, %q, %q", code, out, errOut)
	}
}
