package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// A job on a cluster that starts empty leaves its history where the CLI
// shows it: the cluster's resize, the node requested and ready; the
// job's status changes with its attempt and node. Bad filters are one
// line and exit non-zero.
func TestEventsCommands(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", 100*time.Millisecond
	})
	if _, errOut, code := run(t, "--config", cfg, "compute", "create", "-n", "cpu", "--max-instances", "1"); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	if _, errOut, code := run(t, "--config", cfg, "job", "create", "-n", "j1", "--compute", "cpu", "--command", "true", "--stream"); code != 0 {
		t.Fatalf("job: %s", errOut)
	}

	out, errOut, code := run(t, "--config", cfg, "-o", "table", "compute", "events", "-n", "cpu")
	if code != 0 {
		t.Fatalf("compute events: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "TIME") || len(lines) < 4 {
		t.Fatalf("compute events table:\n%s", out)
	}
	// Oldest first: requested before ready, the resize's start before its end.
	line := func(typ string) int {
		for i, l := range lines {
			if strings.Contains(l, typ) {
				return i
			}
		}
		return -1
	}
	req, ready, started, ended := line("NodeRequested"), line("NodeReady"), line("ResizeStarted"), line("ResizeEnded")
	if req < 0 || started < 0 || ready < req || ended < started || !strings.Contains(lines[started], "from 0 nodes to 1 node") {
		t.Errorf("compute events, oldest first, want a node requested then ready and a resize from 0 to 1 node:\n%s", out)
	}

	out, errOut, code = run(t, "--config", cfg, "compute", "events", "-n", "cpu", "--type", "NodeReady", "-o", "json")
	var evs []api.Event
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil || len(evs) != 1 || evs[0].Type != api.EventNodeReady || evs[0].Node == "" || evs[0].DurationSeconds == nil {
		t.Fatalf("--type NodeReady -o json: %d %s %s", code, out, errOut)
	}

	out, errOut, code = run(t, "--config", cfg, "job", "events", "-n", "j1", "-o", "json")
	evs = nil
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil || len(evs) < 3 {
		t.Fatalf("job events: %d %s %s", code, out, errOut)
	}
	first, last := evs[0], evs[len(evs)-1]
	if first.Type != "JobNotStarted" || last.Type != "JobCompleted" || last.Attempt != 1 || len(last.Nodes) != 1 || last.Job != "j1" {
		t.Errorf("job events from %+v to %+v, want JobNotStarted … JobCompleted of attempt 1 on one node", first, last)
	}

	for _, args := range [][]string{
		{"compute", "events", "-n", "cpu", "--since", "yesterday"},
		{"compute", "events", "-n", "cpu", "--type", "NodeExploded"},
		{"compute", "events", "-n", "nope"},
		{"job", "events", "-n", "j1", "--top", "-1"},
	} {
		_, errOut, code := run(t, append([]string{"--config", cfg}, args...)...)
		if code == 0 || !strings.HasPrefix(errOut, "error: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one error line", args, code, errOut)
		}
	}
}
