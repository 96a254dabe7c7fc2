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
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/distrib"
	"github.com/cumulus-ml/cumulus/internal/procstat"
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

// mpiLaunchd is cumulus-mpi-launchd's main, the part of node r > 0 in an
// MPI launch: it listens on $CUMULUS_MPI_LISTEN and runs the first
// command a caller with the attempt's token asks for (node 0's MPI
// daemon), relaying its output and exit code to the caller as ssh would.
// Callers without the token are refused and the launcher keeps listening.
//
// The launcher is the subreaper of what it runs: a daemon that detaches
// (Open MPI's orted when mpirun asks it to --daemonize) stays its child,
// and the launcher serves it, and the processes it starts, to their end.
// It then ends only when it is stopped (SIGTERM: node 0's mpirun has
// ended, or the job is stopped), so that this node stays the job's while
// mpirun runs and ending on its own never looks like success. It ends at
// once with the daemon's code when the daemon fails, and kills what it
// started when the caller goes away first (mpirun is gone).
func mpiLaunchd() int {
	token := os.Getenv(envMPIToken)
	addr := os.Getenv(envMPIListen)
	if token == "" || addr == "" {
		fmt.Fprintln(os.Stderr, "cumulus-mpi-launchd: no launch token or address")
		return 255
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_SET_CHILD_SUBREAPER, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "cumulus-mpi-launchd: not a subreaper (%v)\n", errno)
		return 255
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	ln, err := listenLauncher(addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cumulus-mpi-launchd: %v\n", err)
		return 255
	}
	env := helperFreeEnv()
	var mu sync.Mutex
	stopped, running := false, false
	served := make(chan int, 1)
	go func() {
		defer ln.Close()
		for {
			conn, err := ln.Accept()
			if err != nil {
				served <- -1 // closed: stopped before any caller came
				return
			}
			req, ok := readLaunchRequest(conn, token)
			if !ok {
				_ = writeFrame(conn, frameExit, []byte("255"))
				conn.Close()
				continue
			}
			ln.Close() // one daemon per node and attempt
			mu.Lock()
			late := stopped
			running = !late
			mu.Unlock()
			if late {
				_ = writeFrame(conn, frameExit, []byte("255"))
				conn.Close()
				served <- -1
				return
			}
			served <- serveCaller(conn, req.Argv, env)
			return
		}
	}()
	select {
	case code := <-served:
		if code != 0 {
			return code // the daemon failed: so does this node's part
		}
		<-stop // held for the job until node 0's mpirun has ended
		return 0
	case <-stop:
	}
	// Stopped first: before mpirun asked for anything (it ended without
	// this node, or the job was stopped), or while the daemon runs.
	mu.Lock()
	stopped = true
	serving := running
	mu.Unlock()
	ln.Close()
	if !serving {
		<-served
		fmt.Fprintln(os.Stderr, "cumulus-mpi-launchd: stopped before node 0's mpirun asked for a process on this node")
		return 0
	}
	signalDescendants(syscall.SIGTERM)
	select {
	case code := <-served:
		return code
	case <-time.After(launchdGrace):
		signalDescendants(syscall.SIGKILL)
		return <-served
	}
}

// launchdGrace is how long a stopped launcher gives the daemon's processes
// between SIGTERM and SIGKILL (less than the agent's own grace).
const launchdGrace = 5 * time.Second

// listenLauncher listens on the launcher's address, or on its port on
// every address when the node's address is not one of this machine's
// (NAT).
func listenLauncher(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return net.Listen("tcp", ":"+port)
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

// serveCaller runs argv for the caller on conn and returns when it and
// every process it left behind have ended (the launcher is their
// subreaper). The caller gets the command's output and, once the command
// has ended and its output is drained, its exit code, as from ssh. When
// the caller goes away before that, everything the command started is
// killed. The result is the command's exit code, else the first failure
// of a process it left, else 0.
func serveCaller(conn net.Conn, argv, env []string) int {
	defer conn.Close()
	// The command's parent-death signal follows the thread that starts
	// it: this goroutine keeps its thread until every child is reaped.
	runtime.LockOSThread()
	var mu sync.Mutex
	send := func(kind byte, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return writeFrame(conn, kind, b)
	}
	fail := func(err error) int {
		_ = send(frameStderr, []byte(fmt.Sprintf("cumulus-mpi-launchd: %v\n", err)))
		_ = send(frameExit, []byte("127"))
		return 127
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fail(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fail(err)
	}
	var relayed sync.WaitGroup
	for kind, r := range map[byte]*os.File{frameStdout: outR, frameStderr: errR} {
		relayed.Add(1)
		go func() {
			defer relayed.Done()
			defer r.Close()
			_, _ = io.Copy(frameWriter{kind: kind, send: send}, r)
		}()
	}
	var answered atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, conn) // EOF or error: the caller is gone
		if !answered.Load() {
			signalDescendants(syscall.SIGKILL) // mpirun is gone: nobody needs them
		}
	}()
	code, left := -1, 0
	exited := make(chan struct{}) // closed once the caller has the exit code
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing left
			break
		}
		c := jobinit.WaitCode(ws)
		if pid != cmd.Process.Pid {
			if left == 0 {
				left = c
			}
			continue
		}
		code = c
		go func() {
			defer close(exited)
			relayed.Wait()
			answered.Store(true)
			_ = send(frameExit, []byte(strconv.Itoa(code)))
		}()
	}
	<-exited
	if code == 0 {
		code = left
	}
	return code
}

// signalDescendants sends sig to every process below this one (the
// daemon, what it started, what detached from it).
func signalDescendants(sig syscall.Signal) {
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := procstat.Read(p); ok {
			children[s.PPID] = append(children[s.PPID], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
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
