package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// needRoot skips a test of isolation, which needs root, unless CI is set
// (CI runs as root, and there a skip would hide a failure).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this test needs root (CI runs as root)")
	}
	t.Skip("needs root: jobs are isolated only when the agent runs as root")
}

// An isolated job's user is a user (getpwuid, getent, id, Python's
// getpass, USER and LOGNAME), its /tmp is the node's own (kept for the next
// job of the same owner, emptied for another owner, never the machine's),
// its /dev/shm is memory of its own of the size it asked for (never the
// machine's, gone with the job), its /proc shows its own processes only,
// and its init's command line holds nothing of the job's command.
func TestIsolatedJobSpace(t *testing.T) {
	needRoot(t)
	const uid = "2000999001"
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) { c.JobUser = uid })
	marker := "leak-" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() { os.Remove("/tmp/" + marker); os.Remove("/dev/shm/" + marker) })
	run := func(uidJob, owner, command string) map[string]string {
		t.Helper()
		f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: uidJob, Name: uidJob, Attempt: 1, Grace: time.Second,
			Owner: owner, Command: command, ShmSize: 64 << 20}})
		if ev := f.exited(uidJob, 30*time.Second); ev.ExitCode != 0 {
			t.Fatalf("%s exited %+v; log:\n%s", uidJob, ev, f.logOf(uidJob))
		}
		return tarFiles(t, f.output(uidJob, "default"))
	}
	out := run("who", "alice", `o="$CUMULUS_OUTPUT_DIR"
getent passwd "$(id -u)" > "$o/getent"
getent group "$(id -g)" > "$o/group"
id > "$o/id"
echo "$USER $LOGNAME $HOME" > "$o/env"
if command -v python3 >/dev/null; then python3 -c 'import getpass, pwd, os; print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_name)' > "$o/python"; else echo none > "$o/python"; fi
echo mine > /tmp/`+marker+` && echo mine > /dev/shm/`+marker+`
stat -f -c '%T %b %S' /dev/shm > "$o/shm"
ls /proc | grep -c '^[0-9]' > "$o/procs"
if cat /proc/$PPID/cmdline >/dev/null 2>&1; then echo seen > "$o/init"; else echo hidden > "$o/init"; fi`)
	home := filepath.Join(ra.cfg.WorkDir, "jobs", "who")
	if want := "cumulus-job:x:" + uid + ":" + uid + ":Cumulus job:" + home + ":/bin/sh\n"; out["getent"] != want {
		t.Errorf("getent passwd = %q, want %q", out["getent"], want)
	}
	if want := "cumulus-job:x:" + uid + ":\n"; out["group"] != want {
		t.Errorf("getent group = %q, want %q", out["group"], want)
	}
	if want := "uid=" + uid + "(cumulus-job) gid=" + uid + "(cumulus-job) groups=" + uid + "(cumulus-job)\n"; out["id"] != want {
		t.Errorf("id = %q, want %q", out["id"], want)
	}
	if want := "cumulus-job cumulus-job " + home + "\n"; out["env"] != want {
		t.Errorf("USER LOGNAME HOME = %q, want %q", out["env"], want)
	}
	if p := out["python"]; p != "none\n" && p != "cumulus-job cumulus-job\n" {
		t.Errorf("python getpass.getuser, pwd.getpwuid = %q", p)
	}
	if f := strings.Fields(out["shm"]); len(f) != 3 || f[0] != "tmpfs" || atoi(t, f[1])*atoi(t, f[2]) != 64<<20 {
		t.Errorf("the job's /dev/shm (type, blocks, block size) = %q, want a tmpfs of 64 MiB", out["shm"])
	}
	if out["init"] != "hidden\n" {
		t.Errorf("the job sees its init's /proc entry: %q", out["init"])
	}
	if n := strings.TrimSpace(out["procs"]); n == "" || len(n) > 1 {
		t.Errorf("the job sees %s processes in /proc, want only its own few", n)
	}
	for _, p := range []string{"/tmp/" + marker, "/dev/shm/" + marker} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the job's %s is the machine's", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ra.cfg.WorkDir, privateTmp, marker)); err != nil || string(b) != "mine\n" {
		t.Errorf("the node's private /tmp holds %q, %v", b, err)
	}

	// The same owner's next job finds its files in /tmp, not in /dev/shm
	// (the last job's memory); another owner's finds neither.
	check := `if test -e /tmp/` + marker + ` || test -e /dev/shm/` + marker + `; then echo found; else echo gone; fi > "$CUMULUS_OUTPUT_DIR/tmp"
if test -e /dev/shm/` + marker + `; then echo found; else echo gone; fi > "$CUMULUS_OUTPUT_DIR/shm"`
	if got := run("again", "alice", check); got["tmp"] != "found\n" || got["shm"] != "gone\n" {
		t.Errorf("the same owner's next job: /tmp %q, /dev/shm %q; want found, gone", got["tmp"], got["shm"])
	}
	if got := run("other", "bob", check)["tmp"]; got != "gone\n" {
		t.Errorf("another owner's job: %q, want gone", got)
	}

	// A running job's command is not on its init's command line.
	const secret = "--api-key=SECRET-B-4242"
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "sleeper", Name: "sleeper", Attempt: 1, Grace: time.Second,
		Owner: "bob", Command: `touch "$CUMULUS_OUTPUT_DIR/started"; sleep 300; echo ` + secret}})
	var inits []string
	f.waitFor(30*time.Second, "the sleeper's init", func() bool {
		inits = inits[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.HasPrefix(string(b), jobinit.Name+"\x00") {
				inits = append(inits, string(b))
			}
		}
		return len(inits) > 0
	})
	for _, c := range inits {
		if strings.Contains(c, "SECRET") {
			t.Errorf("a job init's command line holds the job's command: %q", c)
		}
	}
	f.send(agentapi.PollResponse{Cancel: []string{"sleeper"}})
	f.exited("sleeper", 30*time.Second)
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A process an isolated job leaves behind, out of its process group
// (setsid), ends with the job: the job's init ends every process of the
// job user once the job's command has ended.
func TestIsolatedJobLeavesNothingRunning(t *testing.T) {
	needRoot(t)
	const uid = 2000999002
	f := newFakeServer(t)
	startAgent(t, f, func(c *Config) { c.JobUser = strconv.Itoa(uid) })
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "leaver", Name: "leaver", Attempt: 1, Grace: time.Second,
		Command: `setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > "$CUMULUS_OUTPUT_DIR/pid"; exit 0`}})
	if ev := f.exited("leaver", 30*time.Second); ev.ExitCode != 0 {
		t.Fatalf("leaver exited %+v; log:\n%s", ev, f.logOf("leaver"))
	}
	pid := strings.TrimSpace(tarFiles(t, f.output("leaver", "default"))["pid"])
	if pid == "" {
		t.Fatal("the job did not say which process it left")
	}
	if left := processesOf(uid); len(left) > 0 {
		t.Errorf("processes of the job user left after the job ended: %v (the job left %s)", left, pid)
	}
}

// processesOf lists the live processes of a user.
func processesOf(uid int) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) && !strings.Contains(string(b), "State:\tZ") {
				pids = append(pids, filepath.Base(filepath.Dir(p)))
			}
		}
	}
	return pids
}
