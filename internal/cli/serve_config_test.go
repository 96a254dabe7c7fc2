package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServerConfigFileSetsFlagsTheCommandLineDidNot(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(cfg, []byte("quota-family-cores: 96\nlisten: 127.0.0.1:9999\nmax-attempts: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newServeCmd(&globals{stdout: io.Discard, stderr: io.Discard})
	if err := cmd.Flags().Parse([]string{"--listen", "127.0.0.1:7777", "--data-dir", dir}); err != nil {
		t.Fatal(err)
	}
	if err := applyServerConfig(cmd, ""); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	if get("quota-family-cores") != "96" || get("max-attempts") != "5" {
		t.Fatalf("file settings not applied: quota=%s attempts=%s", get("quota-family-cores"), get("max-attempts"))
	}
	if get("listen") != "127.0.0.1:7777" {
		t.Fatalf("listen = %s, want the command line's value to win", get("listen"))
	}
}

func TestServerConfigFileRefusesUnknownSettings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(cfg, []byte("quota-famly-cores: 96\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newServeCmd(&globals{stdout: io.Discard, stderr: io.Discard})
	err := applyServerConfig(cmd, cfg)
	if err == nil || !strings.Contains(err.Error(), `unknown setting "quota-famly-cores"`) {
		t.Fatalf("err = %v, want the unknown key named", err)
	}
	if err := applyServerConfig(cmd, filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing explicit config file was accepted")
	}
}
