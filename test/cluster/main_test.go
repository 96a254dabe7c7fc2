// Package cluster tests whole clusters end to end: a real `cumulus serve`
// process, real agent processes started by the local provider, real jobs.
package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cumulus-cluster-test")
	if err != nil {
		panic(err)
	}
	binary, _, err = testbin.Cumulus(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopKubeLab()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a `cumulus serve` subprocess on a fixed port and data dir, so
// it can be killed and started again where its agents expect it.
type server struct {
	t       testing.TB
	dataDir string
	addr    string
	cmd     *exec.Cmd
	log     *os.File
	c       *client.Client
	args    []string // serve flags, kept for restarts
}

var bctx = context.Background()

func startServer(t *testing.T, args ...string) *server { return startServerTB(t, args...) }

func startServerTB(t testing.TB, args ...string) *server {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dataDir: t.TempDir(), addr: addr}
	s.start(args...)
	t.Cleanup(func() {
		s.stop()
		killAgents(s.dataDir)
		if t.Failed() || os.Getenv("CUMULUS_TEST_DEBUG") != "" {
			b, _ := os.ReadFile(filepath.Join(s.dataDir, "serve.log"))
			var keep []string
			for _, line := range strings.Split(string(b), "\n") {
				if os.Getenv("CUMULUS_TEST_DEBUG") != "" || !strings.Contains(line, "level=DEBUG") {
					keep = append(keep, line)
				}
			}
			t.Logf("server log (without debug lines):\n%s", tail(strings.Join(keep, "\n"), 8000))
			t.Logf("node logs:\n%s", nodeLogs(s.dataDir))
		}
	})
	return s
}

// start starts (or restarts) the server; flags given once are kept.
func (s *server) start(args ...string) {
	s.t.Helper()
	if len(args) == 0 {
		args = s.args
	}
	s.args = args
	f, err := os.OpenFile(filepath.Join(s.dataDir, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	s.log = f
	all := append([]string{"serve", "--listen", s.addr, "--data-dir", s.dataDir, "--log-level", "debug"}, args...)
	s.cmd = exec.Command(binary, all...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	// Jobs of these tests run helper binaries and leave marks in the test's
	// private temporary folders, which an isolated job (root: a user of its
	// own that sees none of them) cannot reach; test/security checks the
	// isolation.
	s.cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(s.dataDir, "config.yaml"), "CUMULUS_ISOLATE_JOBS=false")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cfg, err := config.Load(filepath.Join(s.dataDir, "config.yaml"))
		if err == nil && cfg.Token != "" {
			if c, err := client.New(cfg); err == nil {
				if _, err := c.ListComputes(context.Background()); err == nil {
					c.PollEvery = 100 * time.Millisecond
					s.c = c
					return
				}
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills the server with SIGKILL: no shutdown code runs.
func (s *server) kill9() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.log.Close()
}

func (s *server) stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
		}
		s.log.Close()
	}
}

// agents lists the running agent processes of dataDir's local nodes
// (testbin.Agents).
func agents(dataDir string) []int { return testbin.Agents(dataDir) }

func killAgents(dataDir string) {
	if testbin.KillAgents(dataDir) > 0 {
		waitPreparedGone(dataDir)
	}
}

// jobContainers lists the containers (running ones, or all) of this
// server's jobs: the engine is shared with other tests running beside.
func (s *server) jobContainers(all bool) []string {
	s.t.Helper()
	db, err := store.OpenSQLite(bctx, filepath.Join(s.dataDir, "cumulus.db"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	uids := map[string]bool{}
	rows, err := db.Q().QueryContext(bctx, `SELECT uid FROM jobs`)
	if err != nil {
		s.t.Fatal(err)
	}
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			s.t.Fatal(err)
		}
		uids[uid] = true
	}
	rows.Close()
	return containersLabelled("cumulus.job", all, func(uid string) bool { return uids[uid] })
}

// containersLabelled lists the containers (running ones, or all) with the
// label whose value keep accepts.
func containersLabelled(label string, all bool, keep func(value string) bool) []string {
	args := []string{"ps", "--filter", "label=" + label, "--format", `{{.ID}} {{.Label "` + label + `"}}`}
	if all {
		args = append(args, "-a")
	}
	out, _ := exec.Command("docker", args...).Output()
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if id, v, ok := strings.Cut(line, " "); ok && keep(v) {
			ids = append(ids, id)
		}
	}
	return ids
}

// waitPreparedGone waits (a while) until the containers that the killed
// agents of dataDir's nodes had prepared have stopped — a launcher exits
// when its agent dies — and removes any left created but never started
// (an agent killed while the engine made one): they hold no files of the
// nodes' work dirs, which the test then removes.
func waitPreparedGone(dataDir string) {
	mine := func(all bool) []string {
		return containersLabelled("cumulus.prepared", all, func(dir string) bool { return strings.HasPrefix(dir, dataDir+"-nodes/") })
	}
	for deadline := time.Now().Add(30 * time.Second); len(mine(false)) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if ids := mine(true); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (s *server) createCompute(name string, min, max int32, idle string) {
	s.t.Helper()
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}
	ctx := context.Background()
	_, resp, err := s.c.PutCompute(ctx, c)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Wait(ctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) submit(name, compute, command string) {
	s.t.Helper()
	j := api.Job{Name: name, Properties: api.JobProperties{Command: command, ComputeID: compute}}
	if _, err := s.c.PutJob(context.Background(), j); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) job(name string) api.Job {
	s.t.Helper()
	j, err := s.c.GetJob(context.Background(), name)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

// log reads a job's whole log (latest attempt, rank 0).
func (s *server) jobLog(name string) string {
	s.t.Helper()
	var out strings.Builder
	var off int64
	for {
		chunk, err := s.c.JobLog(context.Background(), name, -1, 0, off)
		if err != nil {
			s.t.Fatal(err)
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

// nodeLogs are the tails of the node hosts' and node agents' logs of a
// server's local nodes (those still there), for a failing test.
func nodeLogs(dataDir string) string {
	var b strings.Builder
	nodes := config.NodesDir(dataDir)
	hosts, _ := filepath.Glob(filepath.Join(nodes, ".hosts", "*", "host.log"))
	agents, _ := filepath.Glob(filepath.Join(nodes, "*", "agent.log"))
	for _, f := range append(hosts, agents...) {
		out, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "--- %s\n%s\n", strings.TrimPrefix(f, nodes+"/"), tail(string(out), 3000))
	}
	return b.String()
}
