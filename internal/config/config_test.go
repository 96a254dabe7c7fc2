package config

import (
	"path/filepath"
	"testing"
)

// TestServerListRoundTrips: server: holds the replicas' URLs as one
// comma-separated string, written and read back unchanged (the client
// parses it).
func TestServerListRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	want := CLI{Server: "https://cp-a:8787,https://cp-b:8787", Token: "t", Workspace: "w"}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || got != want {
		t.Errorf("Load = %+v, %v; want %+v", got, err, want)
	}
}
