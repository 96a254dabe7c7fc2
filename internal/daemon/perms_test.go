package daemon

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestSecureDataDirTightensAndWarns(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX modes")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]fs.FileMode{"cumulus.db": 0o644, "cumulus.db-wal": 0o664, "secret.key": 0o600, "config.yaml": 0o640, "serve.yaml": 0o644, "tls.crt": 0o644}
	for name, mode := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	for _, name := range []string{"logs", "blobs"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A private name that is a link is left alone (and so is its target).
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	secureDataDir(dir, "", slog.New(slog.NewTextHandler(&logs, nil)))

	want := map[string]fs.FileMode{".": 0o700, "cumulus.db": 0o600, "cumulus.db-wal": 0o600, "secret.key": 0o600, "config.yaml": 0o600,
		"logs": 0o700, "blobs": 0o700, "serve.yaml": 0o644, "tls.crt": 0o644}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s: mode %04o; want %04o", name, got, mode)
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the target of a link was changed: %v %v", fi.Mode(), err)
	}
	out := logs.String()
	for _, name := range []string{"cumulus.db", "cumulus.db-wal", "config.yaml", "logs", "blobs"} {
		if !strings.Contains(out, "path="+filepath.Join(dir, name)+" ") {
			t.Errorf("no warning names %s:\n%s", name, out)
		}
	}
	for _, name := range []string{"secret.key", "serve.yaml", "tls.crt", "tls.key"} {
		if strings.Contains(out, "path="+filepath.Join(dir, name)+" ") {
			t.Errorf("a warning names %s, which needed no fixing:\n%s", name, out)
		}
	}
	if n := strings.Count(out, "took group and other access away"); n != 6 {
		t.Errorf("%d warnings; want 6 (the dir, 2 db files, config, logs, blobs):\n%s", n, out)
	}

	// A second start finds nothing to fix and says nothing.
	logs.Reset()
	secureDataDir(dir, "", slog.New(slog.NewTextHandler(&logs, nil)))
	if logs.Len() != 0 {
		t.Errorf("second pass logged:\n%s", logs.String())
	}
}
