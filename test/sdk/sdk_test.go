// Package sdk_test runs one compute scenario with each official Azure
// client, at its default api-version, against a real `cumulus serve` over
// TLS with its self-signed certificate: Python azure-ai-ml (MLClient),
// Python azure-mgmt-machinelearningservices, JavaScript
// @azure/arm-machinelearning and Go armmachinelearning. Each client learns
// the server from 'cumulus sdk env' alone, as a user's program would.
//
// The clients come from scripts/test-setup.sh (Debian's python3-azure, npm
// ci in test/sdk/js; the Go module is in go.mod). A client that is missing
// skips its test here and fails it in CI.
package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/syncbuf"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// served is a running `cumulus serve` and the environment 'cumulus sdk
// env' gives for it.
type served struct {
	bin     string
	dataDir string
	env     []string // the environment 'cumulus sdk env' gives, plus PATH with cumulus
	out     *syncbuf.Buffer
}

// server is the `cumulus serve` (sim provider) most tests in the package
// talk to.
var server *served

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if server != nil {
			fmt.Fprintln(os.Stderr, server.out.String())
		}
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "cumulus-sdk-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, stop, err := serve(ctx, dir, "--provider", "sim", "--sim-job-duration", "1h")
	if err != nil {
		return 0, err
	}
	defer stop()
	server = srv
	return m.Run(), nil
}

// serve starts `cumulus serve` over TLS with its self-signed certificate,
// state and HOME in dir, with the provider flags given, and reads the
// environment 'cumulus sdk env' prints for it, as a user's eval does.
func serve(ctx context.Context, dir string, provider ...string) (*served, func(), error) {
	bin, _, err := testbin.Cumulus(dir)
	if err != nil {
		return nil, nil, err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "cumulus")); err != nil && !os.IsExist(err) {
		return nil, nil, err
	}
	srv := &served{bin: bin, dataDir: filepath.Join(dir, "data"), out: &syncbuf.Buffer{}}

	base := []string{"HOME=" + dir, "CUMULUS_DATA_DIR=" + srv.dataDir, "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUMULUS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") &&
			!strings.HasPrefix(strings.ToUpper(kv), "HTTPS_PROXY=") && !strings.HasPrefix(strings.ToUpper(kv), "NO_PROXY=") {
			base = append(base, kv)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--tls-self-signed"}, provider...)
	args = append(args, "--subscription-id", "00000000-0000-0000-0000-0000000000ab", "--default-resource-group", "sdk-rg",
		"--location", "westus2", "--default-workspace", "sdk-ws")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = base
	cmd.Stdout, cmd.Stderr = srv.out, srv.out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, err
	}
	stop := func() {
		cancel()
		_ = cmd.Wait()
		testbin.KillAgents(srv.dataDir) // local-provider nodes outlive their server
		_ = os.RemoveAll(config.NodesDir(srv.dataDir))
	}

	cfgPath := filepath.Join(srv.dataDir, "config.yaml")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if cfg, err := config.Load(cfgPath); err == nil && cfg.Token != "" && cfg.CAFile != "" {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return srv, nil, errors.New("cumulus serve did not write its CLI config within 30s")
		}
		time.Sleep(50 * time.Millisecond) // polling for a subprocess's file
	}
	envOut, err := exec.Command(bin, "--config", cfgPath, "sdk", "env").Output()
	if err != nil {
		stop()
		return srv, nil, fmt.Errorf("cumulus sdk env: %w", err)
	}
	srv.env, err = shellEnv(base, string(envOut))
	if err != nil {
		stop()
		return srv, nil, err
	}
	return srv, stop, nil
}

// shellEnv evaluates the exports of 'cumulus sdk env' with sh, as a user's
// eval "$(cumulus sdk env)" does, and returns the resulting environment.
func shellEnv(base []string, exports string) ([]string, error) {
	cmd := exec.Command("sh", "-c", exports+"\nenv")
	cmd.Env = base
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("eval of cumulus sdk env: %w", err)
	}
	var env []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "=") {
			env = append(env, sc.Text())
		}
	}
	return env, sc.Err()
}

// getenv reads a variable of the SDK environment.
func getenv(name string) string { return server.getenv(name) }

// getenv reads a variable of a server's SDK environment.
func (s *served) getenv(name string) string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// missing skips a test whose client is not installed, or fails it in CI.
func missing(t *testing.T, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required in CI (%s; scripts/test-setup.sh installs it)", what, install)
	}
	t.Skipf("skipping: %s is not installed (%s)", what, install)
}

// python returns a python3 that imports module, or "".
func python(module string) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		cmd := exec.Command(path, "-c", "import "+module)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+standinDir(), "PYTHONDONTWRITEBYTECODE=1")
		if cmd.Run() == nil {
			return path
		}
	}
	return ""
}

// standinDir holds the test-only stand-in for pydash (see its docstring).
func standinDir() string {
	abs, _ := filepath.Abs(filepath.Join("python", "standin"))
	return abs
}

// runScenario runs a scenario program with the SDK environment and checks
// that it printed OK and each step it must.
func runScenario(t *testing.T, prefix string, steps []string, name string, args ...string) {
	t.Helper()
	server.runScenario(t, fresh(prefix), steps, name, args...)
}

// fresh is name the first time, then name2, name3…: a test run again
// against the package's one server (go test -count=2) names its jobs
// anew, since a job it canceled the first time cannot be canceled again.
func fresh(name string) string {
	runsMu.Lock()
	defer runsMu.Unlock()
	runs[name]++
	if runs[name] == 1 {
		return name
	}
	return name + strconv.Itoa(runs[name])
}

var (
	runsMu sync.Mutex
	runs   = map[string]int{}
)

// runScenario runs a scenario program against s.
func (s *served) runScenario(t *testing.T, prefix string, steps []string, name string, args ...string) {
	t.Helper()
	server := s
	start := time.Now()
	cmd := exec.Command(name, args...)
	cmd.Env = append(append([]string{}, server.env...), "SCENARIO_PREFIX="+prefix, "PYTHONPATH="+standinDir(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s took %s", filepath.Base(args[len(args)-1]), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\n%s\nserver log tail:\n%s", args[len(args)-1], err, out, tail(server.out.String(), 40))
	}
	for _, s := range append(steps, "OK") {
		if !bytes.Contains(out, []byte("\n"+s)) && !bytes.HasPrefix(out, []byte(s)) {
			t.Errorf("no step %q in the output:\n%s", s, out)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestEnvironmentIsTLS(t *testing.T) {
	if ep := getenv("CUMULUS_ENDPOINT"); !strings.HasPrefix(ep, "https://") || getenv("AZUREML_DEV_URL_MFE") != ep {
		t.Errorf("endpoints %q %q, want the same https URL", ep, getenv("AZUREML_DEV_URL_MFE"))
	}
	for _, v := range []string{"REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"} {
		if p := getenv(v); p == "" {
			t.Errorf("%s is not set", v)
		} else if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	if getenv("CUMULUS_TOKEN") == "" {
		t.Error("CUMULUS_TOKEN is empty: the token command failed")
	}
}

func TestPythonAzureAIML(t *testing.T) {
	py := python("azure.ai.ml")
	if py == "" {
		missing(t, "Python azure-ai-ml", "apt-get install python3-azure")
	}
	runScenario(t, "aiml", []string{"created", "get ", "list ", "updated", "sizes ", "usage ", "unsupported 400 UserError", "job ", "job cancelled", "deleted"},
		py, filepath.Join("python", "azure_ai_ml_scenario.py"))
}

// The job half with azure-ai-ml against a server whose jobs run (local
// provider: agent processes on this machine): local code and data
// uploaded through the datastore (the blob endpoints azure-ai-ml builds
// itself, proxied by the server), a data asset by name, the job streamed
// and its outputs downloaded, a sweep streamed and downloaded, the
// pending upload of newer SDKs with azure-storage-blob, and the refusals
// (no role, another workspace's SAS).
func TestPythonAzureAIMLJobs(t *testing.T) {
	py := python("azure.ai.ml")
	if py == "" {
		missing(t, "Python azure-ai-ml", "apt-get install python3-azure")
	}
	srv, stop, err := serve(context.Background(), t.TempDir(), "--provider", "local")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv.runScenario(t, "jobs", []string{"compute round trip", "subnet ", "data ", "job ", "streamed Completed", "downloaded",
		"pending upload", "uploaded code ran", "sweep streamed Completed", "no role 403", "other workspace's SAS refused"},
		py, filepath.Join("python", "azure_ai_ml_jobs.py"))
}

func TestPythonManagementSDK(t *testing.T) {
	py := python("azure.mgmt.machinelearningservices")
	if py == "" {
		missing(t, "Python azure-mgmt-machinelearningservices", "apt-get install python3-azure")
	}
	runScenario(t, "mgmt", []string{"api-version 2022-10-01", "workspace updated", "created", "get ", "list ", "updated",
		"listKeys VirtualMachineSecrets", "sizes ", "usage ", "unsupported 400 UserError", "job ", "job cancelled", "deleted"},
		py, filepath.Join("python", "mgmt_scenario.py"))
}

// User-assigned identities through Python azure-mgmt-msi: the
// Microsoft.ManagedIdentity api-versions it sends are served.
func TestPythonManagedIdentitySDK(t *testing.T) {
	py := python("azure.mgmt.msi")
	if py == "" {
		missing(t, "Python azure-mgmt-msi", "apt-get install python3-azure")
	}
	runScenario(t, "msi", []string{"identity 2018-11-30 ", "identity 2022-01-31-preview ", "attached", "deleted"},
		py, filepath.Join("python", "msi_scenario.py"))
}

func TestJavaScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node", "apt-get install nodejs")
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "@azure", "arm-machinelearning")); err != nil {
		missing(t, "@azure/arm-machinelearning", "cd test/sdk/js && npm ci")
	}
	runScenario(t, "js", []string{"api-version 2022-10-01", "workspace updated", "created", "get ", "list ", "updated",
		"listKeys VirtualMachine", "sizes ", "usage ", "unsupported 400 UserError", "job ", "job cancelled", "deleted"},
		node, filepath.Join("js", "scenario.mjs"))
}
