package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// Locks from the command line: made on the workspace and on a compute,
// listed (a table by default), shown (JSON), honoured by the server — a
// locked compute cannot be deleted, yet a job on a ReadOnly compute still
// gets a node and runs — and deleted; mistakes are one line and exit
// non-zero.
func TestLockCommands(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", 100*time.Millisecond
	})
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, append([]string{"--config", cfg}, args...)...)
	}
	if _, errOut, code := cli("compute", "create", "-n", "cpu", "--max-instances", "1"); code != 0 {
		t.Fatalf("compute create: %s", errOut)
	}
	out, errOut, code := cli("lock", "create", "-n", "keep", "--lock-type", "CanNotDelete", "--notes", "shared by the team")
	var l api.Lock
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Properties.Level != api.LockCanNotDelete || !strings.HasSuffix(l.ID, "/workspaces/default/providers/Microsoft.Authorization/locks/keep") {
		t.Fatalf("lock create on the workspace: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := cli("lock", "create", "-n", "frozen", "--lock-type", "readonly", "--compute", "cpu"); code != 0 {
		t.Fatalf("lock create on the compute: %s", errOut)
	}

	out, errOut, code = cli("lock", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(out, "workspace default") ||
		!strings.Contains(out, "compute cpu") || !strings.Contains(out, "shared by the team") {
		t.Fatalf("lock list: %d %s %s", code, out, errOut)
	}
	out, _, code = cli("lock", "list", "--compute", "cpu", "-o", "json")
	var ls []api.Lock
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil || len(ls) != 2 {
		t.Errorf("lock list --compute cpu -o json: %d %s, want the workspace's lock and the compute's", code, out)
	}
	out, _, code = cli("lock", "show", "-n", "frozen", "--compute", "cpu")
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Properties.Level != api.LockReadOnly {
		t.Errorf("lock show: %d %s", code, out)
	}

	// The server honours them: no deletion, no change; jobs still run.
	_, errOut, code = cli("compute", "delete", "-n", "cpu", "--yes")
	if code == 0 || !strings.HasPrefix(errOut, "error: ScopeLocked: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("compute delete under locks: exit %d, stderr %q; want one ScopeLocked line", code, errOut)
	}
	_, errOut, code = cli("compute", "update", "-n", "cpu", "--max-instances", "2")
	if code == 0 || !strings.Contains(errOut, "ScopeLocked") {
		t.Errorf("compute update under ReadOnly: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := cli("job", "create", "-n", "j1", "--compute", "cpu", "--command", "true", "--stream"); code != 0 {
		t.Fatalf("a job on a ReadOnly compute: %s", errOut)
	}
	out, _, _ = cli("job", "show", "-n", "j1", "-o", "json")
	if !strings.Contains(out, `"status": "Completed"`) {
		t.Errorf("job on the ReadOnly compute did not complete: %s", out)
	}

	for _, args := range [][]string{
		{"lock", "create", "-n", "x", "--lock-type", "Sometimes"},
		{"lock", "create", "-n", "x"},
		{"lock", "create", "-n", "x", "--lock-type", "ReadOnly", "--compute", "nope"},
		{"lock", "show", "-n", "nope"},
		{"lock", "delete", "-n", "nope"},
		{"lock", "list", "-o", "xml"},
	} {
		_, errOut, code := cli(args...)
		if code == 0 || !strings.HasPrefix(errOut, "error: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one error line", args, code, errOut)
		}
	}

	for _, args := range [][]string{{"lock", "delete", "-n", "frozen", "--compute", "cpu"}, {"lock", "delete", "-n", "keep"}} {
		if _, errOut, code := cli(args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	if out, _, _ := cli("lock", "list"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("locks left: %s", out)
	}
	if _, errOut, code := cli("compute", "delete", "-n", "cpu", "--yes"); code != 0 {
		t.Errorf("compute delete once unlocked: %s", errOut)
	}
}
