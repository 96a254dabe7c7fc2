package cli

import (
	"net/http"
	"os"
	"path/filepath"
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

	// A launcher that fails (no browser behind it) opened nothing.
	bin := t.TempDir()
	failing := filepath.Join(bin, "failing-browser")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'no method available for opening' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", failing)
	out, errOut, code = run(t, "--config", cfg, "ui")
	if code != 0 || !strings.Contains(out, "/ui/login?code=") || !strings.Contains(errOut, "Could not open a browser") || strings.Contains(errOut, "Opened") {
		t.Fatalf("ui with a failing launcher: exit %d, %q, %q", code, out, errOut)
	}

	// On a machine without a display (an SSH session), an installed
	// xdg-open that would start does not mean a browser opened.
	opener := filepath.Join(bin, "xdg-open")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", "")
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, errOut, code = run(t, "--config", cfg, "ui")
	if code != 0 || !strings.Contains(out, "/ui/login?code=") || !strings.Contains(errOut, "no graphical display") || strings.Contains(errOut, "Opened") {
		t.Fatalf("ui without a display: exit %d, %q, %q", code, out, errOut)
	}
}
