// Package e2e runs the cumulus binary end to end: `cumulus serve` as a
// subprocess on a free loopback port with its own data directory, and the
// CLI commands against it, including kill -9 of the server at chosen
// points and restarts on the same data directory.
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/syncbuf"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

var bin string // the cumulus binary built by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cumulus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, _, err = testbin.Cumulus(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is the environment of every subprocess: a private data dir and
// home, no CUMULUS_* setting from the caller.
func env(dataDir string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUMULUS_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "CUMULUS_DATA_DIR="+dataDir, "HOME="+dataDir)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.One()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// cluster is one data directory and the server process serving it.
type cluster struct {
	t       *testing.T
	dataDir string
	port    int
	url     string
	token   string
	proc    *exec.Cmd
	out     *syncbuf.Buffer
	path    string // put before PATH for the server: a stand-in nvidia-smi (see standInGPUs)
	done    chan struct{}
	waitErr error
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, dataDir: t.TempDir(), port: freePort(t)}
	c.url = "http://127.0.0.1:" + strconv.Itoa(c.port)
	t.Cleanup(func() {
		if c.running() {
			_ = c.proc.Process.Kill()
			<-c.done
		}
		if t.Failed() && c.out != nil {
			t.Logf("server output:\n%s", c.out.String())
		}
	})
	return c
}

// standInGPUs gives the server a stand-in nvidia-smi (a test double)
// reporting n GPUs, so that its nodes have GPUs to divide and GPU sizes are
// accepted; call it before serve.
func (c *cluster) standInGPUs(n int) {
	c.t.Helper()
	dir := c.t.TempDir()
	if _, err := gputest.StandIn(dir, gputest.Whole(n, "NVIDIA H100 80GB HBM3")); err != nil {
		c.t.Fatal(err)
	}
	c.path = dir
}

func (c *cluster) running() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// serve starts `cumulus serve` and waits until it answers.
func (c *cluster) serve() {
	c.t.Helper()
	if c.out == nil {
		c.out = &syncbuf.Buffer{}
	}
	fmt.Fprintf(c.out, "---- start\n")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(c.port),
		"--subscription-id", "e2e-sub", "--default-resource-group", "e2e-rg", "--location", "e2eloc", "--default-workspace", "default")
	cmd.Env = env(c.dataDir)
	if c.path != "" {
		cmd.Env = append(cmd.Env, "PATH="+c.path+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.proc, c.done = cmd, make(chan struct{})
	done := c.done
	go func() { c.waitErr = cmd.Wait(); close(done) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		if !c.running() {
			c.t.Fatalf("cumulus serve exited: %v\n%s", c.waitErr, c.out.String())
		}
		if cfg, err := config.Load(filepath.Join(c.dataDir, "config.yaml")); err == nil && cfg.Token != "" && cfg.Server == c.url {
			c.token = cfg.Token
			if st, _, _ := c.http("GET", c.wsPath("default"), ""); st == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cumulus serve did not become ready:\n%s", c.out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// kill9 kills the server without a chance to clean up.
func (c *cluster) kill9() {
	c.t.Helper()
	if err := c.proc.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	<-c.done
}

// term asks the server to shut down and returns its exit error.
func (c *cluster) term() error {
	c.t.Helper()
	if err := c.proc.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-c.done:
		return c.waitErr
	case <-time.After(20 * time.Second):
		c.t.Fatal("cumulus serve did not exit 20s after SIGTERM")
	}
	return nil
}

func (c *cluster) wsPath(ws string) string {
	return "/subscriptions/e2e-sub/resourceGroups/e2e-rg/providers/Microsoft.MachineLearningServices/workspaces/" + ws
}

func (c *cluster) computePath(name string) string { return c.wsPath("default") + "/computes/" + name }

// http calls the API directly with the admin token.
func (c *cluster) http(method, path, body string) (int, http.Header, []byte) {
	c.t.Helper()
	u := path
	if !strings.HasPrefix(u, "http") {
		u = c.url + path
	}
	if !strings.Contains(u, "api-version=") {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "api-version=2024-04-01"
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// result is one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs `cumulus args...` against this cluster's data dir, with an
// empty pipe as stdin (as in a script).
func (c *cluster) cli(args ...string) result {
	c.t.Helper()
	return c.cliStdin(strings.NewReader(""), args...)
}

func (c *cluster) cliStdin(stdin io.Reader, args ...string) result {
	c.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env(c.dataDir)
	cmd.Dir = c.dataDir
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		c.t.Fatal(err)
	}
	return r
}

// ok runs the CLI and fails the test unless it exits 0.
func (c *cluster) ok(args ...string) result {
	c.t.Helper()
	r := c.cli(args...)
	if r.code != 0 {
		c.t.Fatalf("cumulus %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs the CLI and asserts a non-zero exit with one "error:" line
// that contains each of want.
func (c *cluster) fails(want []string, args ...string) result {
	c.t.Helper()
	r := c.cli(args...)
	if r.code == 0 {
		c.t.Fatalf("cumulus %s succeeded; stdout %s", strings.Join(args, " "), r.stdout)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "error: ") {
		c.t.Errorf("cumulus %s: last stderr line %q does not start with \"error: \"", strings.Join(args, " "), last)
	}
	errLines := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "error:") {
			errLines++
		}
	}
	if errLines != 1 {
		c.t.Errorf("cumulus %s: %d error lines in %q", strings.Join(args, " "), errLines, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(last, w) {
			c.t.Errorf("cumulus %s: error %q does not contain %q", strings.Join(args, " "), last, w)
		}
	}
	return r
}

// getCompute reads a compute over HTTP: status and body.
func (c *cluster) getCompute(name string) (int, api.Compute) {
	c.t.Helper()
	st, _, b := c.http("GET", c.computePath(name), "")
	var comp api.Compute
	if st == 200 {
		if err := json.Unmarshal(b, &comp); err != nil {
			c.t.Fatalf("GET %s: %v: %s", name, err, b)
		}
	}
	return st, comp
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 20s", what, state)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
