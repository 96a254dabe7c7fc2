package cli

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// startDaemon starts an in-process control plane on loopback for CLI tests,
// with edit changing its options, and the client environment cleared so
// that only --config (the returned config.yaml) points commands at it. It
// is closed when the test ends.
func startDaemon(t *testing.T, edit func(*daemon.Options)) (*daemon.Daemon, string) {
	t.Helper()
	for _, k := range []string{"CUMULUS_SERVER", "CUMULUS_TOKEN", "CUMULUS_SUBSCRIPTION", "CUMULUS_RESOURCE_GROUP", "CUMULUS_WORKSPACE", "CUMULUS_CONFIG", "BROWSER"} {
		t.Setenv(k, "")
	}
	o := daemon.DefaultOptions()
	o.Listen, o.DataDir = "127.0.0.1:0", t.TempDir()
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if edit != nil {
		edit(&o)
	}
	d, err := daemon.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	return d, filepath.Join(o.DataDir, "config.yaml")
}
