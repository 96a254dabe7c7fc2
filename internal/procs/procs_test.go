package procs

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMain stands in for the cumulus binary when a test starts this test
// binary again with a command line: it prints the processors its init
// left it.
func TestMain(m *testing.M) {
	if os.Getenv("PROCS_TEST_CHILD") != "" {
		os.Stdout.WriteString(strconv.Itoa(runtime.GOMAXPROCS(0)))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func procsOf(t *testing.T, env []string, args ...string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() { // GOMAXPROCS only where a case sets it
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "PROCS_TEST_CHILD=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	n, err := strconv.Atoi(string(out))
	if err != nil {
		t.Fatalf("%s printed %q", strings.Join(args, " "), out)
	}
	return n
}

func TestOneShotCommandsRunOnOneProcessor(t *testing.T) {
	all := procsOf(t, nil) // no command: the runtime's own choice
	for _, args := range [][]string{{"job", "create", "--compute", "c"}, {"compute", "show", "--name", "c"}, {"version"}} {
		if got := procsOf(t, nil, args...); got != 1 {
			t.Errorf("cumulus %s runs on %d processors, want 1", strings.Join(args, " "), got)
		}
	}
	if got := procsOf(t, []string{"GOMAXPROCS=3"}, "job", "list"); got != 3 {
		t.Errorf("with GOMAXPROCS=3 set, job list runs on %d processors", got)
	}
	if all == 1 {
		t.Skip("this machine gives a process one processor anyway")
	}
	for _, args := range [][]string{{"serve"}, {"agent", "--host", "h"}, {"compute", "simulate", "--name", "c"}, {"--config", "x", "job", "list"}} {
		if got := procsOf(t, nil, args...); got != all {
			t.Errorf("cumulus %s runs on %d processors, want all %d", strings.Join(args, " "), got, all)
		}
	}
}
