package agent

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The launcher of a prepared container and its client, without a
// container: the launcher runs here as a child of the test, with the
// environment an image would give it.

// startLauncher starts a launcher with env and returns the agent's
// connection to it and the launcher's command (to wait for).
func startLauncher(t *testing.T, env []string) (*net.UnixConn, *exec.Cmd) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l := &exec.Cmd{Path: "/proc/self/exe", Args: []string{launcherName, sock}, Env: env, Stderr: os.Stderr}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Process.Kill()
		_ = l.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		if err == nil {
			return c, l
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher does not listen: %v", err)
		}
		time.Sleep(time.Millisecond) // it listens a few milliseconds after it starts
	}
}

// execCommand is the client, given conn. startExec starts it, which then
// holds the connection alone, as in a job.
func execCommand(t *testing.T, conn *net.UnixConn, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	f, err := conn.File()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	t.Cleanup(func() { f.Close() })
	return &exec.Cmd{Path: "/proc/self/exe", Args: append([]string{containerExecName, "3"}, argv...),
		Env: env, Dir: t.TempDir(), ExtraFiles: []*os.File{f}}
}

func startExec(t *testing.T, c *exec.Cmd) {
	t.Helper()
	err := c.Start()
	c.ExtraFiles[0].Close()
	if err != nil {
		t.Fatal(err)
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return exitCode(cmd.ProcessState)
}

// The job's exit code is the client's, and the launcher's (the
// container's); the launcher exits with the process.
func TestContainerExecExitCodes(t *testing.T) {
	for _, want := range []int{0, 3} {
		conn, l := startLauncher(t, nil)
		c := execCommand(t, conn, nil, "/bin/sh", "-c", "exit "+strconv.Itoa(want))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if got := waitExit(t, c); got != want {
			t.Errorf("client exit code %d, want %d", got, want)
		}
		if got := waitExit(t, l); got != want {
			t.Errorf("launcher exit code %d, want %d", got, want)
		}
	}
}

// The process gets the image's environment (the launcher's) overlaid with
// the job's, the client's working directory, and the client's stdin,
// stdout and stderr themselves.
func TestContainerExecEnvDirAndDescriptors(t *testing.T) {
	conn, _ := startLauncher(t, []string{"PATH=" + os.Getenv("PATH"), "FROM_IMAGE=image", "BOTH=image"})
	c := execCommand(t, conn, []string{"BOTH=job", "FROM_JOB=se cret"},
		"/bin/sh", "-c", `echo "$FROM_IMAGE $BOTH $FROM_JOB"; pwd; cat; echo to-stderr >&2`)
	var out, errOut strings.Builder
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader("from stdin\n"), &out, &errOut
	startExec(t, c)
	if err := c.Wait(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	want := "image job se cret\n" + c.Dir + "\nfrom stdin\n"
	if out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if errOut.String() != "to-stderr\n" {
		t.Errorf("stderr = %q", errOut.String())
	}
}

// A signal the client receives reaches the process (its group); a process
// killed by a signal ends with 128+signal.
func TestContainerExecRelaysSignals(t *testing.T) {
	conn, l := startLauncher(t, nil)
	c := execCommand(t, conn, nil, "/bin/sh", "-c", "echo ready; exec sleep 30")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startExec(t, c)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := waitExit(t, c); got != 128+int(syscall.SIGTERM) {
		t.Errorf("client exit code %d, want %d", got, 128+int(syscall.SIGTERM))
	}
	waitExit(t, l)
}

// When the client is killed, the launcher kills the process and exits.
func TestContainerExecClientKilledEndsTheJob(t *testing.T) {
	conn, l := startLauncher(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := execCommand(t, conn, nil, "/bin/sh", "-c", `echo $$ > `+pidFile+`; echo ready; exec sleep 30`)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startExec(t, c)
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	_ = c.Process.Kill()
	_ = c.Wait()
	if got := waitExit(t, l); got != 128+int(syscall.SIGKILL) {
		t.Errorf("launcher exit code %d, want %d (the job killed)", got, 128+int(syscall.SIGKILL))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the job's process %d lives on after its client was killed (%v)", pid, err)
	}
}

// A launcher whose connection closes before a request (the agent dropped
// the container, or died) exits; nobody can connect after the agent.
func TestLauncherServesOnlyTheAgent(t *testing.T) {
	conn, l := startLauncher(t, nil)
	sock := l.Args[1]
	// The launcher removes its socket once it has accepted the agent.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(sock); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket is still there after the agent connected")
		}
	}
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		t.Error("a second connection was accepted")
	}
	conn.Close()
	if got := waitExit(t, l); got != 0 {
		t.Errorf("launcher exit code %d, want 0", got)
	}
}

// A command that cannot start ends the job with 127 and says why.
func TestContainerExecCommandNotFound(t *testing.T) {
	conn, _ := startLauncher(t, nil)
	c := execCommand(t, conn, nil, "/no/such/command")
	var errOut strings.Builder
	c.Stderr = &errOut
	startExec(t, c)
	if got := waitExit(t, c); got != 127 {
		t.Errorf("exit code %d, want 127", got)
	}
	if !strings.Contains(errOut.String(), "/no/such/command") {
		t.Errorf("stderr = %q, want the reason", errOut.String())
	}
}

func TestOverlayEnv(t *testing.T) {
	got := strings.Join(overlayEnv([]string{"A=1", "B=2", "C=3"}, []string{"B=x", "D=y"}), " ")
	if want := "A=1 C=3 B=x D=y"; got != want {
		t.Errorf("overlayEnv = %q, want %q", got, want)
	}
}
