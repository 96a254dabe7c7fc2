package agent

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"
	"time"
)

// launch sends one request to the launcher at addr and returns what came
// back: stdout and the exit code.
func launch(t *testing.T, addr, token string, argv ...string) (stdout string, exit string) {
	t.Helper()
	conn, err := dialLauncher(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := json.Marshal(launchRequest{Token: token, Argv: argv})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
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

// The launcher on a node of an MPI job runs a command only for a caller
// with the attempt's token: anyone else who reaches its port is refused
// and it goes on waiting for mpirun.
func TestLauncherRunsOnlyForTheAttemptsToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv(envMPIToken, "the-attempts-token")
	t.Setenv(envMPIListen, addr)
	done := make(chan int, 1)
	go func() { done <- mpiLaunchd() }()

	for _, bad := range []string{"", "the-attempts-toke", "another-attempts-token"} {
		if out, code := launch(t, addr, bad, "/bin/echo", "pwned"); code != "255" || out != "" {
			t.Fatalf("a caller with token %q got output %q and exit %s; want refused (255, nothing run)", bad, out, code)
		}
	}
	out, code := launch(t, addr, "the-attempts-token", "/bin/sh", "-c", "echo orted; exit 3")
	if out != "orted\n" || code != "3" {
		t.Fatalf("mpirun's daemon gave %q, exit %s; want its output and exit 3", out, code)
	}
	select {
	case got := <-done:
		if got != 3 {
			t.Errorf("the launcher ended with %d, want the daemon's 3", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the launcher did not end with the daemon it ran")
	}
}
