package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"
)

// launchd is a launcher (this test binary under the launcher's name) in
// a process of its own, as a node of an MPI job runs it.
type launchd struct {
	addr   string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	exited chan int
}

func startLaunchd(t *testing.T, token string) *launchd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), mpiLaunchdName)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	l := &launchd{addr: addr, exited: make(chan int, 1)}
	l.cmd = exec.Command(bin)
	l.cmd.Env = append(os.Environ(), envMPIToken+"="+token, envMPIListen+"="+l.addr)
	l.cmd.Stderr = &l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = l.cmd.Wait()
		l.exited <- exitCode(l.cmd.ProcessState)
	}()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill()
		<-l.exited
	})
	return l
}

// running reports whether the launcher has not exited.
func (l *launchd) running() bool {
	select {
	case code := <-l.exited:
		l.exited <- code
		return false
	default:
		return true
	}
}

// end waits for the launcher's exit code.
func (l *launchd) end(t *testing.T) int {
	t.Helper()
	select {
	case code := <-l.exited:
		l.exited <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("the launcher did not end; its stderr:\n%s", l.stderr.String())
		return 0
	}
}

// call sends one request to the launcher and returns the open connection.
func call(t *testing.T, addr, token string, argv ...string) net.Conn {
	t.Helper()
	conn, err := dialLauncher(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(launchRequest{Token: token, Argv: argv})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	return conn
}

// launch sends one request to the launcher at addr and returns what came
// back: stdout and the exit code.
func launch(t *testing.T, addr, token string, argv ...string) (stdout string, exit string) {
	t.Helper()
	conn := call(t, addr, token, argv...)
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		kind, data, err := readFrame(r)
		if err != nil {
			t.Fatalf("the launcher went away: %v", err)
		}
		switch kind {
		case frameStdout:
			stdout += string(data)
		case frameExit:
			return stdout, string(data)
		}
	}
}

// waitFile waits for a file a test's command writes, and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The launcher on a node of an MPI job runs a command only for a caller
// with the attempt's token: anyone else who reaches its port is refused
// and it goes on waiting for mpirun. A daemon that fails ends the
// launcher at once with its code.
func TestLauncherRunsOnlyForTheAttemptsToken(t *testing.T) {
	l := startLaunchd(t, "the-attempts-token")
	for _, bad := range []string{"", "the-attempts-toke", "another-attempts-token"} {
		if out, code := launch(t, l.addr, bad, "/bin/echo", "pwned"); code != "255" || out != "" {
			t.Fatalf("a caller with token %q got output %q and exit %s; want refused (255, nothing run)", bad, out, code)
		}
	}
	out, code := launch(t, l.addr, "the-attempts-token", "/bin/sh", "-c", "echo orted; exit 3")
	if out != "orted\n" || code != "3" {
		t.Fatalf("mpirun's daemon gave %q, exit %s; want its output and exit 3", out, code)
	}
	if got := l.end(t); got != 3 {
		t.Errorf("the launcher ended with %d, want the daemon's 3", got)
	}
}

// A daemon that detaches (as Open MPI's orted does when told to
// --daemonize: its first process exits 0 at once) is served to its end:
// the caller gets the 0 at once, as from ssh, but the launcher stays, the
// detached daemon's parent, and after the daemon's end holds its node
// until it is stopped; only then does it end, with 0.
func TestLauncherServesADetachedDaemonToItsEnd(t *testing.T) {
	dir := t.TempDir()
	l := startLaunchd(t, "tok")
	daemon := `setsid sh -c 'echo $$ > started; while [ ! -e go ]; do sleep 0.05; done; echo done > done' </dev/null >/dev/null 2>&1 & exit 0`
	if _, code := launch(t, l.addr, "tok", "/bin/sh", "-c", "cd "+dir+" && "+daemon); code != "0" {
		t.Fatalf("the caller got exit %s; want 0 once the daemon detached", code)
	}
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "started")))
	if !l.running() {
		t.Fatalf("the launcher ended while its detached daemon (pid %d) ran; stderr:\n%s", pid, l.stderr.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "done"))
	for deadline := time.Now().Add(30 * time.Second); processExists(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon %d was not reaped", pid)
		}
	}
	if !l.running() {
		t.Fatalf("the launcher ended on its own after its daemon; want it held until stopped; stderr:\n%s", l.stderr.String())
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	if got := l.end(t); got != 0 {
		t.Fatalf("the stopped launcher ended %d; want 0 (its daemon ended well)", got)
	}
}

// processExists reports whether pid is a live (not zombie) process.
func processExists(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// A launcher stopped while its daemon runs (the job is stopped) stops
// the daemon and what detached from it, and ends without success.
func TestLauncherStoppedStopsItsDaemon(t *testing.T) {
	dir := t.TempDir()
	l := startLaunchd(t, "tok")
	daemon := `setsid sh -c 'echo $$ > started; exec sleep 600' </dev/null >/dev/null 2>&1 & exit 0`
	if _, code := launch(t, l.addr, "tok", "/bin/sh", "-c", "cd "+dir+" && "+daemon); code != "0" {
		t.Fatalf("the caller got exit %s; want 0", code)
	}
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "started")))
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	if got := l.end(t); got == 0 {
		t.Fatal("a launcher stopped while its daemon ran ended 0")
	}
	if processExists(pid) {
		t.Fatalf("the detached daemon %d outlived its launcher", pid)
	}
}

// When the caller (node 0's rsh helper: mpirun is gone) drops the
// connection before the daemon ends, the daemon and what it started are
// killed and the launcher fails.
func TestLauncherKillsItsDaemonWhenTheCallerGoes(t *testing.T) {
	dir := t.TempDir()
	l := startLaunchd(t, "tok")
	conn := call(t, l.addr, "tok", "/bin/sh", "-c", "cd "+dir+" && (sleep 600 & echo $! > child; wait)")
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "child")))
	conn.Close()
	if got := l.end(t); got == 0 {
		t.Fatal("the launcher whose caller went away ended 0")
	}
	if processExists(pid) {
		t.Fatalf("the daemon's child %d outlived its caller", pid)
	}
}

// A launcher stopped before node 0's mpirun asked it for anything (mpirun
// ended without it) ends with 0 and says so.
func TestLauncherStoppedBeforeAnyCaller(t *testing.T) {
	l := startLaunchd(t, "tok")
	if conn, err := dialLauncher(l.addr, 10*time.Second); err == nil {
		conn.Close() // it listens
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	if got := l.end(t); got != 0 {
		t.Fatalf("ended %d; want 0", got)
	}
	if !strings.Contains(l.stderr.String(), "stopped before node 0's mpirun asked for a process on this node") {
		t.Errorf("stderr = %q", l.stderr.String())
	}
}
