package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/provider/sim"
)

// job show prints az ml's entity (snake_case, compute as azureml:NAME, the
// studio page in services.Studio.endpoint); job list is the newest first
// with the display name, and --max-results keeps the newest.
func TestJobShowAndListShape(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", 50*time.Millisecond
	})
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "1")
	for _, n := range []string{"b-first", "a-second", "c-third"} {
		cli("job", "create", "-n", n, "--compute", "cpu", "--command", "true", "--display-name", "run "+n, "--timeout", "60")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(cli("job", "show", "-n", "a-second")), &v); err != nil {
		t.Fatal(err)
	}
	if _, rest := v["properties"]; rest || v["compute"] != "azureml:cpu" || v["display_name"] != "run a-second" || v["type"] != "command" {
		t.Errorf("job show is not az ml's shape: %v", v)
	}
	if l, _ := v["limits"].(map[string]any); l["timeout"] != 60.0 {
		t.Errorf("limits = %v, want timeout 60 (seconds)", v["limits"])
	}
	endpoint := cli("job", "show", "-n", "a-second", "--query", "services.Studio.endpoint", "-o", "tsv")
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") || !strings.HasSuffix(endpoint, "/#/jobs/a-second\n") {
		t.Errorf("studio endpoint = %q", endpoint)
	}

	if got := cli("job", "list", "--query", "[].name", "-o", "tsv"); got != "c-third\na-second\nb-first\n" {
		t.Errorf("job list order = %q, want the newest first", got)
	}
	if got := cli("job", "list", "--max-results", "2", "--query", "[].name", "-o", "tsv"); got != "c-third\na-second\n" {
		t.Errorf("--max-results 2 = %q", got)
	}
	table := cli("job", "list", "-o", "table")
	if lines := strings.Split(table, "\n"); !strings.Contains(lines[0], "DISPLAY NAME") || !strings.Contains(lines[1], "run c-third") {
		t.Errorf("job list table:\n%s", table)
	}

	// A job with no display name of its own (the CLI's default, or an SDK
	// that sends none) shows its name there, as Azure does, not "-".
	cli("job", "create", "-n", "d-plain", "--compute", "cpu", "--command", "true")
	c, err := client.New(mustConfig(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutJob(context.Background(), api.Job{Name: "e-sdk", Properties: api.JobProperties{Command: "true", ComputeID: c.Scope.ComputeID("cpu")}}); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(cli("job", "list", "-o", "table"), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 {
			rows[f[0]] = f
		}
	}
	for _, n := range []string{"d-plain", "e-sdk"} {
		if rows[n] == nil || rows[n][1] != n {
			t.Errorf("job list row of %s: %q, want its name as the display name", n, rows[n])
		}
	}
	if got := cli("job", "show", "-n", "e-sdk", "--query", "display_name", "-o", "tsv"); got != "e-sdk\n" {
		t.Errorf("job show display_name of a job sent without one = %q", got)
	}
}

func mustConfig(t *testing.T, path string) config.CLI {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A job queued behind a cluster at max_instances says so in job show, job
// list and job stream, not an empty message. The first job runs until it
// is canceled, so the second waits as long as the test looks.
func TestQueuedJobSaysWhy(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", time.Second
	})
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "1")
	cli("job", "create", "-n", "first", "--compute", "cpu", "--command", "true", "--environment-variables", sim.DurationEnv+"=1h")
	cli("job", "create", "-n", "second", "--compute", "cpu", "--command", "true")
	const why = "waiting for nodes: the cluster is at its maximum of 1 nodes"
	deadline := time.Now().Add(60 * time.Second)
	for {
		var j JobView
		json.Unmarshal([]byte(cli("job", "show", "-n", "second")), &j)
		msg := j.Status + ": " + j.StatusMessage
		if strings.HasPrefix(msg, "Queued: "+why) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second job: %q, want it Queued waiting for the cluster at its maximum", msg)
		}
		time.Sleep(50 * time.Millisecond) // polling a real server
	}
	if table := cli("job", "list", "--status", "Queued"); !strings.Contains(table, "maximum of 1 nodes") {
		t.Errorf("job list does not say why:\n%s", table)
	}
	// job stream says why while the job waits, then follows it to its end
	// once the first job is canceled.
	errOut := &watchedBuffer{want: "  " + why, seen: make(chan struct{})}
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), []string{"--config", cfg, "job", "stream", "-n", "second"}, io.Discard, errOut)
	}()
	select {
	case <-errOut.seen:
	case code := <-done:
		t.Fatalf("stream ended (exit %d) before saying why the job waits:\n%s", code, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("stream did not say why the job waits:\n%s", errOut.String())
	}
	cli("job", "cancel", "-n", "first")
	if code := <-done; code != 0 {
		t.Errorf("stream: exit %d, stderr:\n%s", code, errOut.String())
	}
}

// watchedBuffer is a writer that tells, by closing seen, when what was
// written holds want.
type watchedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A preempted job's second attempt says why it runs again; a cluster with
// one node needs no --node-id to simulate its eviction. The job runs until
// it is canceled, so the eviction always finds it running.
func TestStreamSaysWhyAttemptRepeats(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", time.Hour
	})
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "spot", "--max-instances", "1", "--tier", "low_priority")
	cli("job", "create", "-n", "j", "--compute", "spot", "--command", "true")
	deadline := time.Now().Add(20 * time.Second)
	for cli("job", "show", "-n", "j", "--query", "status", "-o", "tsv") != "Running\n" {
		if time.Now().After(deadline) {
			t.Fatal("job not Running after 20 s")
		}
		time.Sleep(50 * time.Millisecond) // polling a real server
	}
	cli("compute", "simulate-eviction", "-n", "spot")
	errOut := &watchedBuffer{want: "--- attempt 2 (attempt 1 ended: ", seen: make(chan struct{})}
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), []string{"--config", cfg, "job", "stream", "-n", "j"}, io.Discard, errOut)
	}()
	select {
	case <-errOut.seen:
	case code := <-done:
		t.Fatalf("stream ended (exit %d) before the second attempt:\n%s", code, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("stream did not say why the job runs again:\n%s", errOut.String())
	}
	cli("job", "cancel", "-n", "j")
	<-done
}

// compute create on an existing name updates it and says so, as az does;
// compute update refuses to change the size with a hint, not "unknown flag".
func TestComputeCreateExistingAndUpdateSize(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "1")
	_, errOut, code := run(t, "--config", cfg, "compute", "create", "-n", "cpu", "--max-instances", "3")
	if code != 0 || !strings.Contains(errOut, "Compute cpu exists: updated") {
		t.Errorf("create again: exit %d, %q", code, errOut)
	}
	if got := cli("compute", "show", "-n", "cpu", "--query", "max_instances"); strings.TrimSpace(got) != "3" {
		t.Errorf("max_instances after create again = %s", got)
	}
	_, errOut, code = run(t, "--config", cfg, "compute", "update", "-n", "cpu", "--size", "Standard_NC6")
	if code == 0 || !strings.Contains(errOut, "--size cannot change on an existing compute") || strings.Contains(errOut, "unknown flag") {
		t.Errorf("update --size: exit %d, %q", code, errOut)
	}
}
