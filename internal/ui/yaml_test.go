package ui_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/ui"
)

// The job page posts pasted YAML to /ui/api/yaml and gets it back as
// JSON; only a signed-in page (with its CSRF header) may ask.
func TestYAMLToJSON(t *testing.T) {
	h := newHarness(t)
	cookie, s := h.login()
	csrf := map[string]string{s.CSRFHeader: s.CSRF, "Content-Type": "application/yaml"}
	job := "$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json\n" +
		"command: >-\n  python train.py\n  --epochs 3\ncompute: azureml:cpu\n" +
		"resources:\n  instance_count: 2\nenvironment_variables:\n  SEED: \"7\"\ninputs:\n  lr: 0.01\n"
	a := h.do("POST", "/ui/api/yaml", job, csrf, cookie)
	if a.status != 200 {
		t.Fatalf("convert: %d %s", a.status, a.body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(a.body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"$schema": "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json",
		"command": "python train.py --epochs 3", "compute": "azureml:cpu",
		"resources":             map[string]any{"instance_count": 2.0},
		"environment_variables": map[string]any{"SEED": "7"},
		"inputs":                map[string]any{"lr": 0.01},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	for _, c := range []struct{ name, body, says string }{
		{"syntax", "command: [unclosed\n", "line"},
		{"not a mapping", "- a\n- b\n", "mapping"},
		{"two documents", "command: a\n---\ncommand: b\n", "more than one document"},
		{"numeric keys", "inputs:\n  1: a\n", "inputs"},
		{"empty", "", "empty"},
	} {
		a := h.do("POST", "/ui/api/yaml", c.body, csrf, cookie)
		if a.status != 400 || a.errorCode() != "ValidationError" || !strings.Contains(a.body, c.says) {
			t.Errorf("%s: %d %s, want 400 ValidationError saying %q", c.name, a.status, a.body, c.says)
		}
	}
	if a := h.do("POST", "/ui/api/yaml", job, map[string]string{"Content-Type": "application/yaml"}, cookie); a.status != 403 {
		t.Errorf("without the CSRF header: %d %s", a.status, a.body)
	}
	if a := h.do("POST", "/ui/api/yaml", job, csrf, nil); a.status != 401 {
		t.Errorf("signed out: %d %s", a.status, a.body)
	}
	if a := h.do("POST", "/ui/api/yaml", strings.Repeat("# padding\n", 30000), csrf, cookie); a.status != 400 {
		t.Errorf("too long: %d", a.status)
	}
}

// The sign-in page names the file the server wrote its token to.
func TestSignInNamesTheConfigFile(t *testing.T) {
	// The path only to a browser on the server's machine: a path may name
	// a user.
	elsewhere := "config.yaml in the server's data directory"
	for _, c := range []struct{ set, public, from, want string }{
		{"", "", "127.0.0.1:5000", "~/.cumulus/config.yaml"},
		{"/srv/cumulus/config.yaml", "", "[::1]:5000", "/srv/cumulus/config.yaml"},
		{"/srv/cumulus/config.yaml", "", "192.0.2.7:5000", elsewhere},
		{"/srv/cumulus/config.yaml", "https://ml.example.com", "127.0.0.1:5000", elsewhere}, // a proxy in front
	} {
		u := ui.New(ui.Options{ConfigPath: c.set, PublicURL: c.public, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/ui/signin", nil)
		r.RemoteAddr = c.from
		u.ServeHTTP(w, r)
		var got struct{ ConfigPath string }
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || got.ConfigPath != c.want {
			t.Errorf("ConfigPath %q from %s: %d %s, want %q", c.set, c.from, w.Code, w.Body, c.want)
		}
	}
	// The sign-in form's errors name it too.
	h := newHarness(t)
	body, hdr := form("cml_wrong")
	if a := h.do("POST", "/ui/login", body, hdr, nil); !strings.Contains(a.body, "config.yaml on the server") {
		t.Errorf("wrong token: %s", a.body)
	}
}
