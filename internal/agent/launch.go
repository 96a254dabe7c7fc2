package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
)

// The launcher and its client: how a job's process starts in a container
// that was started before the job came (a prepared container, see
// prepared.go).
//
// The container's main process is this executable under the name
// cumulus-container-launch (a static binary, mounted read-only into the
// container). It listens on a unix socket in a directory mounted from the
// host, accepts one connection — the agent's, which holds it until a job
// takes the container — and removes the socket, so that nobody else can
// ever connect. On that connection comes one request: the job's argv,
// environment and working directory, with the caller's stdin, stdout and
// stderr as descriptors (SCM_RIGHTS). The launcher starts the process as
// its own child, so the process has exactly the container's privileges
// (namespaces, capabilities, seccomp profile, user); it forwards the
// signals the client relays, answers the process's exit status, and exits:
// the container (docker run --rm) goes away with it. When the connection
// drops first (the agent died before a job came, or the client was
// killed), the launcher kills the process and exits.
//
// The client, cumulus-container-exec, is what the job init runs on the
// host instead of a `docker run` client: it gets the connection as a
// descriptor, sends the request with its own descriptors 0-2 and its
// environment (the job's variables: never on a command line), relays the
// signals it receives and exits with the job's exit code.
//
// On the wire: the request is a 4-byte big-endian length, sent with the
// three descriptors, then that many bytes of JSON (execRequest); after
// it, each byte from the client is a signal to forward. The launcher's
// answer is one JSON line (execResult).

const (
	// launcherName is argv[0] of the launcher in a prepared container.
	launcherName = "cumulus-container-launch"
	// containerExecName is argv[0] of the client: the job init runs it
	// with the connection to a launcher as descriptor 3:
	// cumulus-container-exec 3 COMMAND ARGS...
	containerExecName = jobinit.ContainerExecName
	// launcherKillAll, before the socket path, tells the launcher it is in
	// a container of its own: when the job's process ends, every other
	// process it can signal is killed too (kill(-1); PID 1, the
	// container's init, is spared and exits with the launcher).
	launcherKillAll = "--kill-all"
	// launcherAcceptTimeout is how long a launcher waits for the agent to
	// connect before it gives up: the agent connects as soon as the
	// container runs, unless it died meanwhile.
	launcherAcceptTimeout = 10 * time.Second
	// maxExecRequest bounds a request (the job's variables included).
	maxExecRequest = 16 << 20
)

// execRequest is what the client asks the launcher to run.
type execRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"` // overlaid on the launcher's (the image's) environment
	Dir  string   `json:"dir"`
}

// execResult is the launcher's answer: the exit code (128+signal when a
// signal ended the process), or why the process could not start.
type execResult struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// relayedSignals are the signals the client passes on to the job's process
// group, as `docker run` does to its container.
var relayedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// launcherMain is the launcher's main: [--kill-all] SOCKET.
func launcherMain(args []string) int {
	killAll := len(args) > 0 && args[0] == launcherKillAll
	if killAll {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "cumulus: usage: "+launcherName+" [--kill-all] SOCKET")
		return 2
	}
	conn, err := acceptOne(args[0], launcherAcceptTimeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cumulus: launcher: %v\n", err)
		return 1
	}
	defer conn.Close()
	return serveLaunch(conn, killAll)
}

// acceptOne listens on path, accepts one connection and removes the
// socket. The socket is open to every user: the directory it is in (the
// agent's, mode 0700) is what keeps others out, and the container's user
// may not be the agent's.
func acceptOne(path string, timeout time.Duration) (*net.UnixConn, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer l.Close() // removes the socket
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, err
	}
	if err := l.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	return l.AcceptUnix()
}

// serveLaunch runs the one request that comes on conn and answers its exit
// status. It returns the launcher's exit code: the process's, or 0 when
// the connection closed without a request.
func serveLaunch(conn *net.UnixConn, killAll bool) int {
	req, files, err := readExecRequest(conn)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			fmt.Fprintf(os.Stderr, "cumulus: launcher: %v\n", err)
		}
		return 0 // no job came: the agent let the container go
	}
	answer := func(r execResult) { _ = json.NewEncoder(conn).Encode(r) }
	if len(req.Argv) == 0 {
		answer(execResult{Code: 127, Error: "empty command"})
		return 127
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = overlayEnv(os.Environ(), req.Env)
	cmd.Dir = req.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		answer(execResult{Code: 127, Error: err.Error()})
		return 127
	}
	pid := cmd.Process.Pid
	// Signals from the client reach the process's group; a dropped
	// connection (the client was killed) kills it.
	go func() {
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				return
			}
			if s := syscall.Signal(b[0]); s > 0 && s < 65 {
				_ = syscall.Kill(-pid, s)
			}
		}
	}()
	_ = cmd.Wait() // the status is read from ProcessState
	code := exitCode(cmd.ProcessState)
	// What the process left behind ends with it, before the status is
	// told: the job is over when its client exits, as with `docker run`.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if killAll {
		_ = syscall.Kill(-1, syscall.SIGKILL) // not this process, nor PID 1
	}
	answer(execResult{Code: code})
	return code
}

// readExecRequest reads a request and the three descriptors sent with it.
func readExecRequest(conn *net.UnixConn) (execRequest, []*os.File, error) {
	var req execRequest
	var hdr [4]byte
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(hdr[:], oob)
	if err != nil {
		return req, nil, err
	}
	if n == 0 {
		return req, nil, io.EOF
	}
	files, err := parseRights(oob[:oobn])
	if err != nil {
		return req, nil, err
	}
	fail := func(err error) (execRequest, []*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return req, nil, err
	}
	if len(files) != 3 {
		return fail(fmt.Errorf("request with %d descriptors, want 3", len(files)))
	}
	if _, err := io.ReadFull(conn, hdr[n:]); err != nil {
		return fail(fmt.Errorf("request header: %w", err))
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxExecRequest {
		return fail(fmt.Errorf("request of %d bytes", size))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return fail(fmt.Errorf("request: %w", err))
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fail(fmt.Errorf("request: %w", err))
	}
	return req, files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("request descriptors: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for i, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(i)))
		}
	}
	return files, nil
}

// overlayEnv is base with every variable of over set (replaced or added).
func overlayEnv(base, over []string) []string {
	set := make(map[string]bool, len(over))
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			env = append(env, kv)
		}
	}
	return append(env, over...)
}

// containerExecMain is the client's main: FD COMMAND ARGS..., with FD the
// connection to a launcher. It runs COMMAND there with this process's
// environment, working directory and descriptors 0-2, and returns its exit
// code.
func containerExecMain(args []string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "cumulus: run in the container: %v\n", err)
		return 127
	}
	if len(args) < 2 {
		return fail(errors.New("usage: " + containerExecName + " FD COMMAND [ARGS...]"))
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		return fail(fmt.Errorf("descriptor %q", args[0]))
	}
	f := os.NewFile(uintptr(fd), "launcher")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fail(err)
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		return fail(errors.New("the descriptor is not a unix socket"))
	}
	dir, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, relayedSignals...) // before the request: none is lost
	if err := sendExecRequest(conn, execRequest{Argv: args[1:], Env: os.Environ(), Dir: dir}); err != nil {
		return fail(err)
	}
	go func() {
		for s := range sigs {
			_, _ = conn.Write([]byte{byte(s.(syscall.Signal))})
		}
	}()
	var res execResult
	if err := json.NewDecoder(conn).Decode(&res); err != nil {
		fmt.Fprintln(os.Stderr, "cumulus: the container ended without the job's exit status")
		return 137 // as `docker run` answers for a killed container
	}
	if res.Error != "" {
		fmt.Fprintf(os.Stderr, "cumulus: %s\n", res.Error)
	}
	return res.Code
}

// sendExecRequest sends req with descriptors 0-2.
func sendExecRequest(conn *net.UnixConn, req execRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, _, err := conn.WriteMsgUnix(hdr[:], syscall.UnixRights(0, 1, 2), nil); err != nil {
		return fmt.Errorf("send the request: %w", err)
	}
	if _, err := conn.Write(body); err != nil {
		return fmt.Errorf("send the request: %w", err)
	}
	return nil
}
