package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// scripts/serve.sh says what a first build is doing and about how long it
// takes, before minutes of silence; a later build says neither. A stand-in
// for go on PATH records what the script asks of it and "builds" a
// bin/cumulus that prints its arguments (a real first build takes minutes).
func TestServeScriptSaysWhatTheFirstBuildDoes(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	script, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "scripts", "serve.sh"))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "scripts"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, "scripts", "serve.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	calls := filepath.Join(tools, "calls")
	goStandIn := `#!/bin/sh
echo "$*" >> ` + calls + `
case "$1" in
env) echo /tmp/gomodcache ;;
build) mkdir -p bin; printf '#!/bin/sh\necho "cumulus $*"\n' > bin/cumulus; chmod +x bin/cumulus ;;
esac
`
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(goStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	serve := func() (string, string) {
		cmd := exec.Command("bash", filepath.Join(repo, "scripts", "serve.sh"), "--listen", "127.0.0.1:9999")
		cmd.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("serve.sh: %v\n%s", err, stderr.String())
		}
		return string(out), stderr.String()
	}

	out, say := serve()
	for _, want := range []string{"first build", "150 MB", "3 to 10 minutes", "[1/2] fetching the Go modules", "[2/2] compiling bin/cumulus", "built "} {
		if !strings.Contains(say, want) {
			t.Errorf("first run does not say %q:\n%s", want, say)
		}
	}
	if strings.TrimSpace(out) != "cumulus serve --listen 127.0.0.1:9999" {
		t.Errorf("first run started %q", out)
	}
	if b, _ := os.ReadFile(calls); !strings.Contains(string(b), "mod download") || !strings.Contains(string(b), "build -o bin/cumulus ./cmd/cumulus") {
		t.Errorf("go was asked:\n%s", b)
	}

	out, say = serve()
	if strings.Contains(say, "first build") || !strings.Contains(say, "[2/2]") || !strings.Contains(out, "cumulus serve") {
		t.Errorf("a later run:\n%s%s", say, out)
	}
}
