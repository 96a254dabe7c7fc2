package security

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
)

// Attacks of a job on its node (local provider): reading the control
// plane's state, inheriting the server's environment, outliving its agent.

// needRoot skips a test that needs root (job isolation is root's), unless
// CI is set: CI runs as root, and there a skip would hide a failure.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this test needs root (CI runs as root)")
	}
	t.Skip("needs root: jobs on local nodes are isolated only when the server runs as root")
}

// nodeAgents lists the pids of the live agent processes of a server's
// local nodes (their work dirs are in its nodes dir).
func nodeAgents(dataDir string) []int {
	nodes := config.NodesDir(dataDir)
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !procAlive(p) {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, " agent ") && strings.Contains(cmd, " "+nodes+"/") {
			if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// procAlive reports whether /proc/<pid> is a process that is not a zombie.
func procAlive(procDir string) bool {
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+1:]), " Z")
}

// killNodesAtEnd kills the server's agents (and so their jobs) when the
// test ends: local nodes outlive a stopped server by design.
func killNodesAtEnd(t *testing.T, s *server) {
	t.Cleanup(func() {
		for _, pid := range nodeAgents(s.dataDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

func submit(t *testing.T, s *server, name, compute, command string) {
	t.Helper()
	j := api.Job{Name: name, Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: command,
		ComputeID: s.admin.Scope.ComputeID(compute)}}
	if _, err := s.admin.PutJob(bctx, j); err != nil {
		t.Fatal(err)
	}
}

// TestJobCannotReadDataDir: a job tries to read the control plane's state
// (admin token in config.yaml, secret.key, cumulus.db), another node's
// folder and job, its own agent's identity and the agents' environment
// (/proc/<pid>/environ: the join token). Every attempt fails; the job can
// still use its own folder.
func TestJobCannotReadDataDir(t *testing.T) {
	needRoot(t)
	s := startServer(t)
	killNodesAtEnd(t, s)
	compute(t, s.admin, "iso", 2)
	data, nodes := s.dataDir, config.NodesDir(s.dataDir)

	// A job of another node, holding a file of its own.
	submit(t, s, "victim", "iso", `echo victim-secret > "$CUMULUS_OUTPUT_DIR/secret.txt"; sleep 300`)
	var victimDir string
	waitFor(t, "the victim job to run", 60*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(nodes, "*", "work", "jobs", "*", "outputs", "secret.txt"))
		if len(m) == 1 {
			victimDir = filepath.Dir(filepath.Dir(m[0]))
		}
		return victimDir != ""
	})
	victimNode := filepath.Dir(filepath.Dir(filepath.Dir(victimDir)))

	files := []string{
		filepath.Join(data, "config.yaml"), filepath.Join(data, "secret.key"), filepath.Join(data, "cumulus.db"),
		filepath.Join(victimNode, "work", "identity.json"), filepath.Join(victimNode, "agent.log"),
		filepath.Join(victimDir, "outputs", "secret.txt"), filepath.Join(victimDir, "std.log"),
		"$HOME/../../identity.json",                       // this job's own agent's
		"/proc/$PPID/environ",                             // the job's supervisor
		"/proc/$(cut -d' ' -f4 /proc/$PPID/stat)/environ", // the agent
	}
	dirs := []string{data, nodes, victimNode, filepath.Join(victimNode, "work", "jobs"), victimDir}
	var cmd strings.Builder
	cmd.WriteString(`echo "uid $(id -u)"; echo mine > mine.txt && cat mine.txt > /dev/null && echo "OWN-FOLDER-OK"` + "\n")
	for _, f := range files {
		fmt.Fprintf(&cmd, "if cat %s > /dev/null 2>&1; then echo \"READ %s\"; else echo \"DENIED %s\"; fi\n", f, f, f)
	}
	for _, d := range dirs {
		fmt.Fprintf(&cmd, "if ls %s > /dev/null 2>&1; then echo \"LISTED %s\"; else echo \"DENIED %s\"; fi\n", d, d, d)
	}
	got, log := runJob(t, s.admin, "attacker", "iso", cmd.String())
	t.Logf("the attacker's log:\n%s", log)
	if got.Properties.Status != api.JobCompleted {
		t.Fatalf("attacker job %s: %s\nlog:\n%s", got.Properties.Status, got.Properties.StatusMessage, log)
	}
	if !strings.Contains(log, "OWN-FOLDER-OK") {
		t.Errorf("the job could not use its own folder; log:\n%s", log)
	}
	if strings.Contains(log, "uid 0\n") {
		t.Errorf("the job ran as root; log:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "READ ") || strings.HasPrefix(line, "LISTED ") {
			t.Errorf("the job reached what it must not: %s", line)
		}
	}
	if n, want := strings.Count(log, "DENIED "), len(files)+len(dirs); n != want {
		t.Errorf("%d attempts denied, want %d; log:\n%s", n, want, log)
	}
	if strings.Contains(log, "victim-secret") {
		t.Error("the other node's job output reached the attacker's log")
	}
}

// TestJobDoesNotInheritServerEnv: a server started with a cloud secret in
// its environment runs a job that prints its environment: neither the
// secret nor the node's join token is there; PATH and HOME are.
func TestJobDoesNotInheritServerEnv(t *testing.T) {
	sentinel := fmt.Sprintf("sentinel-%d", time.Now().UnixNano())
	t.Setenv("AWS_SECRET_ACCESS_KEY", sentinel) // the server started next inherits it
	s := startServer(t)
	killNodesAtEnd(t, s)
	compute(t, s.admin, "envc", 1)
	got, log := runJob(t, s.admin, "printenv", "envc", `env; echo "home is $HOME"; echo END`)
	if got.Properties.Status != api.JobCompleted || !strings.Contains(log, "END") {
		t.Fatalf("job %s: %s\nlog:\n%s", got.Properties.Status, got.Properties.StatusMessage, log)
	}
	if strings.Contains(log, sentinel) || strings.Contains(log, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("the job saw the server's AWS_SECRET_ACCESS_KEY; env:\n%s", log)
	}
	if strings.Contains(log, "CUMULUS_JOIN_TOKEN") {
		t.Errorf("the job saw the node's join token; env:\n%s", log)
	}
	lines := "\n" + log
	for _, want := range []string{"\nPATH=", "\nHOME=", "\nCUMULUS_JOB_NAME=printenv"} {
		if !strings.Contains(lines, want) {
			t.Errorf("job env lacks %s; env:\n%s", strings.TrimPrefix(want, "\n"), log)
		}
	}
	// The agent itself did not get the server's environment either (root
	// reads it; another user cannot: the agent is not dumpable).
	for _, pid := range nodeAgents(s.dataDir) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && strings.Contains(string(env), sentinel) {
			t.Errorf("agent %d has the server's AWS_SECRET_ACCESS_KEY", pid)
		}
	}
}

// TestJobDiesWithItsAgent: the agent of a running job is killed with
// SIGKILL. The job's processes are gone at once, and the job, requeued on
// another node, never runs twice at the same time: every copy takes an
// exclusive lock on a file outside the cluster, and one that finds it
// taken says so.
func TestJobDiesWithItsAgent(t *testing.T) {
	s := startServer(t, "--heartbeat-timeout", "5s")
	killNodesAtEnd(t, s)
	compute(t, s.admin, "once", 2)
	// Not in /tmp: an isolated job's /tmp is its node's own.
	shared, err := os.MkdirTemp("/var/tmp", "cumulus-once-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	// Jobs run as users of their own: the folder and its files are
	// everyone's.
	for _, f := range []string{"lock", "pids", "overlap"} {
		if err := os.WriteFile(filepath.Join(shared, f), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(shared, f), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	script := `exec 9>>` + shared + `/lock
if ! flock -n 9; then echo "attempt $CUMULUS_ATTEMPT" >> ` + shared + `/overlap; exit 3; fi
sleep 300 &
echo "$CUMULUS_ATTEMPT $$ $!" >> ` + shared + `/pids
wait`
	submit(t, s, "once", "once", script)
	t.Cleanup(func() { _, _ = s.admin.CancelJob(bctx, "once") })

	// pids holds "attempt shell-pid child-pid" per copy that took the lock.
	copies := func() [][3]int {
		b, _ := os.ReadFile(filepath.Join(shared, "pids"))
		var out [][3]int
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var c [3]int
			if _, err := fmt.Sscanf(line, "%d %d %d", &c[0], &c[1], &c[2]); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	waitFor(t, "the job's first copy to run", 60*time.Second, func() bool { return len(copies()) == 1 })
	first := copies()[0]
	agents := nodeAgents(s.dataDir)
	if len(agents) != 1 {
		t.Fatalf("%d agents; want 1", len(agents))
	}
	if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, "the job's processes to die with their agent", 5*time.Second, func() bool {
		return !procAlive(fmt.Sprintf("/proc/%d", first[1])) && !procAlive(fmt.Sprintf("/proc/%d", first[2]))
	})
	t.Logf("the job's processes were gone %s after the agent was killed", time.Since(killed).Round(time.Millisecond))

	waitFor(t, "the requeued job to run again", 90*time.Second, func() bool { return len(copies()) >= 2 })
	if b, _ := os.ReadFile(filepath.Join(shared, "overlap")); len(b) > 0 {
		t.Errorf("a copy of the job found another one running: %s", b)
	}
	if c := copies(); len(c) != 2 || c[1][0] <= first[0] {
		t.Errorf("copies of the job (attempt, shell, child) = %v; want attempt %d and one later attempt", c, first[0])
	}
}
