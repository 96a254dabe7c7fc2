package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// TestUIPrintsAOneTimeSignInLink runs `cumulus ui --print-url` against an
// in-process control plane and follows the link like a browser.
func TestUIPrintsAOneTimeSignInLink(t *testing.T) {
	for _, k := range []string{"CUMULUS_SERVER", "CUMULUS_TOKEN", "CUMULUS_SUBSCRIPTION", "CUMULUS_RESOURCE_GROUP", "CUMULUS_WORKSPACE", "CUMULUS_CONFIG", "BROWSER"} {
		t.Setenv(k, "")
	}
	o := daemon.DefaultOptions()
	o.Listen, o.DataDir = "127.0.0.1:0", t.TempDir()
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := daemon.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(ctx)
	}()
	cfg := filepath.Join(o.DataDir, "config.yaml")

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
