// Package security reproduces attacks on a running Cumulus and shows each
// refused: a real `cumulus serve` subprocess with the local provider (real
// agent processes, real jobs), two workspaces, and callers with different
// roles. Each attack is one named test.
package security

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

var binary string // the static cumulus of the test run

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cumulus-security-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, _, err = testbin.Cumulus(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var bctx = context.Background()

// server is a `cumulus serve` subprocess on a free loopback port with its
// own data directory; admin is a client with the admin token it created.
type server struct {
	t       testing.TB
	dataDir string
	addr    string
	cmd     *exec.Cmd
	log     *os.File
	admin   *client.Client
	args    []string
}

// startServer starts `cumulus serve` with extra flags and stops it (and
// its nodes) when the test ends.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dataDir: t.TempDir(), addr: addr, args: args}
	s.start()
	t.Cleanup(func() {
		s.stop()
		killAgents(s.dataDir)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(s.dataDir, "serve.log"))
			t.Logf("server log:\n%s", tail(string(b), 8000))
		}
	})
	return s
}

func (s *server) start() {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.dataDir, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	s.log = f
	all := append([]string{"serve", "--listen", s.addr, "--data-dir", s.dataDir, "--log-level", "debug"}, s.args...)
	s.cmd = exec.Command(binary, all...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(s.dataDir, "config.yaml"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cfg, err := config.Load(filepath.Join(s.dataDir, "config.yaml"))
		if err == nil && cfg.Token != "" {
			if c, err := client.New(cfg); err == nil {
				if _, err := c.ListComputes(bctx); err == nil {
					c.PollEvery = 100 * time.Millisecond
					s.admin = c
					return
				}
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process
	}
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.log.Close()
}

// as is a client of the same server acting with another token, in
// workspace ws ("" keeps the admin's).
func (s *server) as(token, ws string) *client.Client {
	c := *s.admin
	c.Token = token
	if ws != "" {
		c.Scope.Workspace = ws
	}
	return &c
}

// principal creates a principal with role in workspace ws and returns a
// client acting as it there.
func (s *server) principal(name, role, ws string) *client.Client {
	s.t.Helper()
	if _, err := s.admin.CreatePrincipal(bctx, name, "User"); err != nil {
		s.t.Fatal(err)
	}
	tok, err := s.admin.CreateToken(bctx, name, "")
	if err != nil {
		s.t.Fatal(err)
	}
	c := s.as(tok.Token, ws)
	if _, err := s.admin.AssignRole(bctx, name, role, c.Scope.WorkspaceID()); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// workspace creates a workspace.
func (s *server) workspace(name string) {
	s.t.Helper()
	if _, err := s.admin.PutWorkspace(bctx, api.Workspace{Name: name, Location: "local"}); err != nil {
		s.t.Fatal(err)
	}
}

// compute creates a CPU cluster of up to max nodes as c.
func compute(t testing.TB, c *client.Client, name string, max int32) {
	t.Helper()
	zero := int32(0)
	comp := api.Compute{Name: name}
	comp.Properties.ComputeType = api.ComputeTypeAml
	a := comp.Aml()
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT30S"}
	_, resp, err := c.PutCompute(bctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
}

// runJob submits a command job to compute as c, waits for it to end and
// returns it with its log.
func runJob(t testing.TB, c *client.Client, name, compute, command string) (api.Job, string) {
	t.Helper()
	j := api.Job{Name: name, Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: command,
		ComputeID: c.Scope.ComputeID(compute)}}
	if _, err := c.PutJob(bctx, j); err != nil {
		t.Fatal(err)
	}
	var got api.Job
	waitFor(t, "job "+name+" to end", 90*time.Second, func() bool {
		var err error
		got, err = c.GetJob(bctx, name)
		return err == nil && api.JobTerminal(got.Properties.Status)
	})
	return got, jobLog(t, c, name)
}

// jobLog reads a job's whole log (latest attempt, rank 0).
func jobLog(t testing.TB, c *client.Client, name string) string {
	t.Helper()
	var out strings.Builder
	var off int64
	for {
		chunk, err := c.JobLog(bctx, name, -1, 0, off)
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Content == "" {
			return out.String()
		}
		out.WriteString(chunk.Content)
		off += int64(len(chunk.Content))
	}
}

// waitFor polls cond every 50 ms until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killAgents kills the agent processes of a server's nodes (they outlive
// the server by design) and their jobs.
func killAgents(dataDir string) {
	nodesDir := config.NodesDir(dataDir)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, " agent ") && strings.Contains(cmd, " "+nodesDir+"/") {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
