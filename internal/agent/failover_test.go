package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/freeport"
)

// TestFailsOverToALiveReplica: with the first server of its list dead,
// the agent registers, polls, ships its job's log and uploads its outputs
// through the second.
func TestFailsOverToALiveReplica(t *testing.T) {
	t.Parallel()
	addr, err := freeport.Addr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + addr
	f := newFakeServer(t)
	list := dead + "," + f.srv.URL
	ra := startAgent(t, f, func(c *Config) { c.ServerURL = list })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{
		UID: "job-1", Attempt: 1, Grace: time.Second,
		Command: `echo hello; echo result > "$CUMULUS_OUTPUT_DIR/result.txt"`,
	}})
	if ev := f.exited("job-1", 10*time.Second); ev.ExitCode != 0 {
		t.Errorf("exited event = %+v; want exit 0", ev)
	}
	if got := f.logOf("job-1"); got != "hello\n" {
		t.Errorf("log = %q", got)
	}
	if def := tarFiles(t, f.output("job-1", "default")); def["result.txt"] != "result\n" {
		t.Errorf("default output = %v; want result.txt", keys(def))
	}
	b, err := os.ReadFile(filepath.Join(ra.cfg.WorkDir, "identity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || id.Server != list {
		t.Errorf("saved identity server = %q (%v); want the list %q", id.Server, err, list)
	}
}

// TestIdentityOutlivesAChangedServerList: a saved identity belongs to the
// control plane, not to one replica: it is kept when replicas are added,
// removed or reordered, and dropped for a list with no URL in common.
func TestIdentityOutlivesAChangedServerList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := &agent{cfg: Config{WorkDir: dir, ServerURL: "https://a:8787,https://b:8787"}}
	if err := a.saveIdentity(identity{NodeID: "n1", NodeToken: "tok", Server: a.cfg.ServerURL}); err != nil {
		t.Fatal(err)
	}
	for list, want := range map[string]bool{
		"https://a:8787,https://b:8787":   true,
		"https://b:8787/, https://a:8787": true,
		"https://b:8787,https://c:8787":   true,
		"https://c:8787":                  false,
	} {
		a.cfg.ServerURL = list
		if _, ok := a.loadIdentity(); ok != want {
			t.Errorf("identity loaded for %q = %v; want %v", list, ok, want)
		}
	}
}
