package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// --set changes a compute or a job by its YAML keys, as az's does, refusing
// what cannot change and suggesting the key a typo is likely of.
func TestUpdateSet(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider, o.SimJobDuration = "sim", 50*time.Millisecond })
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "2", "--tags", "team=vision")
	cli("compute", "update", "-n", "cpu", "--set", "max_instances=4", "--set", "tags.stage=prod", "--set", "idle_policy.kind=adaptive")
	if got := cli("compute", "show", "-n", "cpu", "--query", "[max_instances, tags.team, tags.stage, idle_policy.kind]", "-o", "tsv"); got != "4\nvision\nprod\nadaptive\n" {
		t.Errorf("after --set: %q", got)
	}
	for args, want := range map[string]string{
		"--set size=Standard_NC6":                 "the size cannot change",
		"--set max_instance=3":                    "unknown key max_instance; did you mean max_instances?",
		"--set max_instances=lots":                `max_instances "lots" is not a whole number`,
		"--set max_instances":                     "is not KEY=VALUE",
		"--set min_instances=1 --max-instances 3": "--set goes with --name alone",
	} {
		_, errOut, code := run(t, append([]string{"--config", cfg, "compute", "update", "-n", "cpu"}, strings.Fields(args)...)...)
		if code == 0 || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("compute update %s: exit %d, %q; want %q", args, code, errOut, want)
		}
	}

	cli("job", "create", "-n", "j", "--compute", "cpu", "--command", "true", "--tags", "a=1")
	cli("job", "update", "-n", "j", "--set", "display_name=best run", "--set", "tags.b=2")
	if got := cli("job", "show", "-n", "j", "--query", "[display_name, tags.a, tags.b]", "-o", "tsv"); got != "best run\n1\n2\n" {
		t.Errorf("job after update: %q", got)
	}
	_, errOut, code := run(t, "--config", cfg, "job", "update", "-n", "j", "--set", "command=false")
	if code == 0 || !strings.Contains(errOut, "only display_name, description and tags change") {
		t.Errorf("job update --set command: exit %d, %q", code, errOut)
	}
}

// validate reads a file as create does and submits nothing.
func TestValidate(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := mustRun(t, cfg)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	_, errOut, code := run(t, "--config", cfg, "compute", "validate", "-f", write("c.yml", "name: cpu\ntype: amlcompute\nsize: Standard_DS3_v2\nmax_instances: 2\n"))
	if code != 0 || !strings.Contains(errOut, "c.yml is a valid compute") {
		t.Errorf("valid compute: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "compute", "validate", "-f", write("bad.yml", "name: cpu\nsize: Standard_DS3_v3\n"))
	if code == 0 || !strings.Contains(errOut, "did you mean Standard_DS3_v2?") {
		t.Errorf("unknown size: exit %d, %q", code, errOut)
	}
	if out := cli("compute", "list", "-o", "tsv"); out != "" {
		t.Errorf("validate created a compute: %q", out)
	}
	cli("compute", "create", "-f", filepath.Join(dir, "c.yml"))
	os.Mkdir(filepath.Join(dir, "src"), 0o755)
	_, errOut, code = run(t, "--config", cfg, "job", "validate", "-f", write("job.yml", "command: python x.py\ncode: ./src\ncompute: azureml:cpu\nresources: {instance_count: 1, instance_type: Standard_NC6}\n"))
	if code != 0 || !strings.Contains(errOut, "warning: job.yml: resources.instance_type is ignored") || !strings.Contains(errOut, "job.yml is a valid job") {
		t.Errorf("valid job: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "job", "validate", "-f", write("job2.yml", "command: x\ncode: ./nosuch\ncompute: azureml:cpu\n"))
	if code == 0 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("missing code folder: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "job", "validate", "-f", write("job3.yml", "command: x\ncompute: azureml:gpu\n"))
	if code == 0 || !strings.Contains(errOut, "compute gpu") {
		t.Errorf("missing compute: exit %d, %q", code, errOut)
	}
	if out := cli("job", "list", "-o", "tsv"); out != "" {
		t.Errorf("validate submitted a job: %q", out)
	}
}
