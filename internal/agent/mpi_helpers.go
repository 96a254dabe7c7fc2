package agent

import (
	"bufio"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// The launch protocol between cumulus-mpi-rsh (node 0, started by mpirun
// as `cumulus-mpi-rsh HOST COMMAND...`) and cumulus-mpi-launchd (every
// other node): one request line of JSON (the attempt's token and the
// command), then frames from the launcher: a kind byte, a big-endian
// uint32 length and the data — stdout, stderr, and last the exit code.

const (
	frameStdout = 'o'
	frameStderr = 'e'
	frameExit   = 'x'
)

// launchRequest is the request line.
type launchRequest struct {
	Token string   `json:"token"`
	Argv  []string `json:"argv"`
}

// mpiConnectFor is how long the rsh helper tries to reach a launcher: the
// other nodes may still be downloading the job's code.
const mpiConnectFor = 2 * time.Minute

// mpiRsh is cumulus-mpi-rsh's main: [OPTIONS] HOST COMMAND [ARGS...], as
// mpirun calls ssh (leading options such as -x are ignored).
func mpiRsh(args []string) int {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		args = args[1:]
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "cumulus-mpi-rsh: want HOST COMMAND [ARGS...]")
		return 255
	}
	rank, ok := distrib.NodeOfHost(args[0])
	addrs := strings.Split(os.Getenv(envMPILaunchers), ",")
	if !ok || rank >= len(addrs) {
		fmt.Fprintf(os.Stderr, "cumulus-mpi-rsh: %q is not a node of this job (the hostfile names them localhost, cumulus-node-1, …)\n", args[0])
		return 255
	}
	// ssh hands the remote shell one string; mpirun quotes for it.
	argv := []string{"/bin/sh", "-c", strings.Join(args[1:], " ")}
	conn, err := dialLauncher(addrs[rank], mpiConnectFor)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cumulus-mpi-rsh: node %d: %v\n", rank, err)
		return 255
	}
	defer conn.Close()
	req, _ := json.Marshal(launchRequest{Token: os.Getenv(envMPIToken), Argv: argv})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "cumulus-mpi-rsh: node %d: %v\n", rank, err)
		return 255
	}
	r := bufio.NewReader(conn)
	for {
		kind, data, err := readFrame(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cumulus-mpi-rsh: node %d: the launcher went away: %v\n", rank, err)
			return 255
		}
		switch kind {
		case frameStdout:
			_, _ = os.Stdout.Write(data)
		case frameStderr:
			_, _ = os.Stderr.Write(data)
		case frameExit:
			code, _ := strconv.Atoi(string(data))
			return code
		}
	}
}

// dialLauncher connects to a launcher, retrying within d.
func dialLauncher(addr string, d time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(d)
	wait := 100 * time.Millisecond
	for {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no launcher at %s after %s: %w", addr, d, err)
		}
		time.Sleep(wait) // waiting for another node's launcher to listen
		wait = min(2*wait, time.Second)
	}
}

// mpiLaunchd is cumulus-mpi-launchd's main: it listens on
// $CUMULUS_MPI_LISTEN, runs the first command a caller with the attempt's
// token asks for, relays its output and exits with its exit code. Callers
// without the token are refused and the launcher keeps listening.
func mpiLaunchd() int {
	token := os.Getenv(envMPIToken)
	addr := os.Getenv(envMPIListen)
	if token == "" || addr == "" {
		fmt.Fprintln(os.Stderr, "cumulus-mpi-launchd: no launch token or address")
		return 255
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// The node's address may not be one of this machine's (NAT).
		_, port, _ := net.SplitHostPort(addr)
		if ln, err = net.Listen("tcp", ":"+port); err != nil {
			fmt.Fprintf(os.Stderr, "cumulus-mpi-launchd: %v\n", err)
			return 255
		}
	}
	defer ln.Close()
	env := helperFreeEnv()
	for {
		conn, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "cumulus-mpi-launchd: %v\n", err)
			return 255
		}
		req, ok := readLaunchRequest(conn, token)
		if !ok {
			_ = writeFrame(conn, frameExit, []byte("255"))
			conn.Close()
			continue
		}
		ln.Close() // one daemon per node and attempt
		return runForCaller(conn, req.Argv, env)
	}
}

// readLaunchRequest reads a request and checks its token.
func readLaunchRequest(conn net.Conn, token string) (launchRequest, bool) {
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(conn, 1<<20)).ReadBytes('\n')
	_ = conn.SetReadDeadline(time.Time{})
	var req launchRequest
	if err != nil || json.Unmarshal(line, &req) != nil || len(req.Argv) == 0 {
		return req, false
	}
	return req, subtle.ConstantTimeCompare([]byte(req.Token), []byte(token)) == 1
}

// runForCaller runs argv, relays its output to conn and ends with its exit
// code; when the caller goes away first, the command is killed.
func runForCaller(conn net.Conn, argv, env []string) int {
	defer conn.Close()
	var mu sync.Mutex
	send := func(kind byte, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return writeFrame(conn, kind, b)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = frameWriter{kind: frameStdout, send: send}
	cmd.Stderr = frameWriter{kind: frameStderr, send: send}
	if err := cmd.Start(); err != nil {
		_ = send(frameStderr, []byte(fmt.Sprintf("cumulus-mpi-launchd: %v\n", err)))
		_ = send(frameExit, []byte("127"))
		return 127
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // EOF or error: the caller is gone
		close(gone)
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-gone:
			_ = cmd.Process.Kill()
		case <-done:
		}
	}()
	_ = cmd.Wait()
	close(done)
	code := exitCode(cmd.ProcessState)
	_ = send(frameExit, []byte(strconv.Itoa(code)))
	return code
}

// helperFreeEnv is the launcher's environment for the daemon, without the
// launcher's own address.
func helperFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envMPIListen+"=") {
			env = append(env, kv)
		}
	}
	return env
}

type frameWriter struct {
	kind byte
	send func(byte, []byte) error
}

func (w frameWriter) Write(b []byte) (int, error) {
	if err := w.send(w.kind, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func writeFrame(w io.Writer, kind byte, data []byte) error {
	hdr := make([]byte, 5, 5+len(data))
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(data)))
	_, err := w.Write(append(hdr, data...))
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 16<<20 {
		return 0, nil, errors.New("frame too large")
	}
	data := make([]byte, n)
	_, err := io.ReadFull(r, data)
	return hdr[0], data, err
}
