package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// cli runs the cumulus binary against the server and returns its output
// and exit code.
func (s *server) cli(dir string, args ...string) (stdout, stderr string, code int) {
	s.t.Helper()
	return s.cliAs(dir, "", args...)
}

// cliAs runs the CLI with another token (CUMULUS_TOKEN) when one is given.
func (s *server) cliAs(dir, token string, args ...string) (stdout, stderr string, code int) {
	s.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(s.dataDir, "config.yaml"))
	if token != "" {
		cmd.Env = append(cmd.Env, "CUMULUS_TOKEN="+token)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The az ml job YAML end to end through the CLI: code and a local input
// folder are uploaded, ${{inputs.*}}/${{outputs.*}} bind, the log streams,
// outputs download, and stream's exit code says how the job ended.
func TestJobYAMLThroughCLI(t *testing.T) {
	s := startServer(t)
	s.createCompute("cpu-cluster", 0, 1, "PT30S")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src", "train.sh"), `echo "lr=$1 data=$(cat "$2/rows.csv")"; echo weights > "$3/model.bin"; echo done > "$CUMULUS_OUTPUT_DIR/summary.txt"; echo "epochs=$EPOCHS"`+"\n")
	write(t, filepath.Join(dir, "data", "rows.csv"), "1,2,3\n")
	write(t, filepath.Join(dir, "job.yml"), `$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
name: yaml-job
command: sh train.sh ${{inputs.lr}} ${{inputs.data}} ${{outputs.model}}
code: ./src
compute: azureml:cpu-cluster
environment_variables:
  EPOCHS: "3"
inputs:
  lr: 0.01
  data:
    type: uri_folder
    path: ./data
outputs:
  model:
    type: uri_folder
limits:
  timeout: 60
experiment_name: cli-test
`)
	start := time.Now()
	out, errOut, code := s.cli(dir, "job", "create", "--file", "job.yml", "--stream")
	t.Logf("stream took %s", time.Since(start))
	if code != 0 {
		t.Fatalf("job create --stream exited %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"lr=0.01 data=1,2,3", "epochs=3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("streamed log %q lacks %q", out, want)
		}
	}
	if _, errOut, code := s.cli(dir, "job", "download", "-n", "yaml-job", "--all"); code != 0 {
		t.Fatalf("download exited %d: %s", code, errOut)
	}
	for file, want := range map[string]string{"artifacts/model/model.bin": "weights\n", "artifacts/default/summary.txt": "done\n"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	t.Logf("download done at %s", time.Since(start))
	// Streaming the ended job replays its log and its status changes, each
	// stamped with the time the server recorded, Completed last.
	out, errOut, code = s.cli(dir, "job", "stream", "-n", "yaml-job")
	if code != 0 || !strings.Contains(out, "epochs=3") {
		t.Fatalf("job stream of a completed job: exit %d, log %q", code, out)
	}
	j, err := s.c.GetJob(bctx, "yaml-job")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, h := range j.Properties.History {
		want = append(want, fmt.Sprintf("[%s] %s", h.Time.Local().Format("15:04:05"), h.Status))
	}
	if got := strings.Split(strings.TrimSpace(errOut), "\n"); len(want) < 3 || !slices.Equal(got, want) {
		t.Fatalf("replayed status lines:\n%s\nwant the server's history:\n%s", errOut, strings.Join(want, "\n"))
	}
	// A failing job: stream exits non-zero with one line that says why.
	_, errOut, code = s.cli(dir, "job", "create", "--compute", "cpu-cluster", "--command", "echo oops; exit 3", "-n", "bad-job", "--stream")
	if code == 0 || !strings.Contains(errOut, "error: job bad-job failed") || !strings.Contains(errOut, "exit code 3") {
		t.Fatalf("stream of a failing job exited %d with %q, want non-zero and the exit code", code, errOut)
	}
	t.Logf("failing job done at %s", time.Since(start))
	// Bad input is refused with one line and changes nothing.
	_, errOut, code = s.cli(dir, "job", "create", "--compute", "no-such-cluster", "--command", "true", "-n", "orphan")
	if code == 0 || !strings.HasPrefix(errOut, "error: ValidationError") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("submit to a missing compute: exit %d, %q", code, errOut)
	}
	if _, _, code := s.cli(dir, "job", "show", "-n", "orphan"); code == 0 {
		t.Fatal("a refused job was stored")
	}
	out, _, _ = s.cli(dir, "job", "list")
	if !strings.Contains(out, "yaml-job") || !strings.Contains(out, "Completed") || !strings.Contains(out, "Failed") {
		t.Fatalf("job list = %q", out)
	}
}

// 'compute simulate' replays the cluster's own finished jobs under other
// settings.
func TestComputeSimulateReplaysHistory(t *testing.T) {
	s := startServer(t)
	s.createCompute("hist", 0, 2, "PT30S")
	for i := 0; i < 3; i++ {
		s.submit(fmt.Sprintf("h-%d", i), "hist", "sleep 0.2")
	}
	for i := 0; i < 3; i++ {
		s.waitJob(fmt.Sprintf("h-%d", i), api.JobCompleted, 60*time.Second)
	}
	dir := t.TempDir()
	out, errOut, code := s.cli(dir, "compute", "simulate", "-n", "hist", "--idle", "600s", "--provision-delay", "60s", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errOut)
	}
	var r struct {
		Settings struct {
			Max  int     `json:"maxNodeCount"`
			Idle float64 `json:"idleTimeoutSeconds"`
		} `json:"settings"`
		Total struct {
			Jobs      int `json:"jobs"`
			Completed int `json:"completed"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if r.Total.Jobs != 3 || r.Total.Completed != 3 || r.Settings.Max != 2 || r.Settings.Idle != 600 {
		t.Fatalf("simulate result = %+v, want the 3 jobs replayed with max 2 from the cluster and idle 600 s from the flag", r)
	}
	if _, errOut, code := s.cli(dir, "compute", "simulate", "-n", "nosuch"); code == 0 || !strings.HasPrefix(errOut, "error: ") {
		t.Fatalf("simulate of a missing compute: exit %d %q", code, errOut)
	}
}
