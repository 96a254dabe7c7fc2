package cli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/syncbuf"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512MiB": 512 << 20, "1048576": 1 << 20, "2 KiB": 2048, "1GB": 1e9, "0": 0, "10B": 10} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "1.5GiB", "-1", "GiB", "1 PiB", "99999999999999TiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
}

func TestSettingValue(t *testing.T) {
	if got := settingValue([]any{"local", "westeurope"}); got != "local,westeurope" {
		t.Errorf("list: %q", got)
	}
	if got := settingValue(1024); got != "1024" {
		t.Errorf("number: %q", got)
	}
	if got := splitList(" local, westeurope ,,"); len(got) != 2 || got[0] != "local" || got[1] != "westeurope" {
		t.Errorf("splitList: %q", got)
	}
}

// A poll hold that is not shorter than the heartbeat timeout would make
// every idle node look dead: serve refuses it in one line, before it
// starts anything.
func TestServeRefusesAPollTimeoutPastTheHeartbeat(t *testing.T) {
	for _, args := range [][]string{
		{"--poll-timeout", "2m"},
		{"--poll-timeout", "90s", "--heartbeat-timeout", "90s"},
		{"--poll-timeout", "0s"},
		{"--poll-timeout", "20s", "--heartbeat-timeout", "15s"},
	} {
		var out, errb strings.Builder
		dir := t.TempDir()
		code := Main(t.Context(), append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, args...), &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), "--poll-timeout") {
			t.Errorf("serve %v: exit %d, %q", args, code, errb.String())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("serve %v wrote %d files in its data dir before refusing", args, len(ents))
		}
	}
}

// A heartbeat timeout under the default hold, the hold not asked for,
// is served (the hold is cut to a third of it), not refused.
func TestServeCutsTheDefaultPollTimeoutToAShortHeartbeat(t *testing.T) {
	var out, errb syncbuf.Buffer // the server's log and serve's own lines, from several goroutines
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	Main(ctx, []string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--heartbeat-timeout", "15s"}, &out, &errb)
	if strings.Contains(errb.String(), "--poll-timeout") {
		t.Fatalf("serve refused the default hold: %q", errb.String())
	}
}

// CUMULUS_NODE_HOST that is not a boolean is refused in one line naming
// it, before serve writes anything.
func TestServeRefusesANodeHostThatIsNotABoolean(t *testing.T) {
	t.Setenv("CUMULUS_NODE_HOST", "sometimes")
	var out, errb strings.Builder
	dir := t.TempDir()
	code := Main(t.Context(), []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "CUMULUS_NODE_HOST") || strings.Count(strings.TrimSpace(errb.String()), "\n") > 0 {
		t.Errorf("serve with CUMULUS_NODE_HOST=sometimes: exit %d, %q; want one line naming it", code, errb.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("serve wrote %d files in its data dir before refusing", len(ents))
	}
}

// Running the simulated agents in a process of their own means nothing
// for another provider: serve refuses it in one line, before it starts.
func TestServeRefusesASimHostProcessWithoutTheSimProvider(t *testing.T) {
	var out, errb strings.Builder
	dir := t.TempDir()
	code := Main(t.Context(), []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--provider", "local", "--sim-host-process"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "--sim-host-process is for --provider sim") {
		t.Errorf("serve --provider local --sim-host-process: exit %d, %q", code, errb.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("serve wrote %d files in its data dir before refusing", len(ents))
	}
}
