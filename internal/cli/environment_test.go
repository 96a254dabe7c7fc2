package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// environment list without --name lists every environment with its latest
// version; a job names one as azureml:NAME@latest; Azure's curated names
// run in the node's own environment (saying so) until the workspace
// registers them.
func TestEnvironmentsLatestAndCurated(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := mustRun(t, cfg)
	cli("environment", "create", "--name", "torch", "--version", "1", "--image", "python:3.10")
	cli("environment", "create", "--name", "torch", "--version", "2", "--image", "python:3.11")
	cli("environment", "create", "--name", "sk", "--version", "7", "--image", "python:3.12")
	if got := cli("environment", "list", "--query", "[].[name, properties.latestVersion, properties.latestImage]", "-o", "tsv"); got != "sk\t7\tpython:3.12\ntorch\t2\tpython:3.11\n" {
		t.Errorf("environment list = %q", got)
	}
	cli("compute", "create", "-n", "cpu")
	job := filepath.Join(t.TempDir(), "job.yml")
	os.WriteFile(job, []byte("command: 'true'\ncompute: azureml:cpu\nenvironment: azureml:torch@latest\n"), 0o600)
	cli("job", "create", "-f", job, "-n", "j1")
	if got := cli("job", "show", "-n", "j1", "--query", "environment_image", "-o", "tsv"); got != "python:3.11\n" {
		t.Errorf("@latest ran in %q, want python:3.11", got)
	}

	// A curated name the workspace has not registered runs in the node's
	// own environment, and says so.
	os.WriteFile(job, []byte("command: 'true'\ncompute: azureml:cpu\nenvironment: azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest\n"), 0o600)
	cli("job", "create", "-f", job, "-n", "curated")
	got := cli("job", "show", "-n", "curated", "--query", "[environment_image, environment_note]", "-o", "json")
	if !strings.Contains(got, `""`) && !strings.Contains(got, "null") || !strings.Contains(got, "curated environments") || !strings.Contains(got, "node's own environment") {
		t.Errorf("curated name: %s", got)
	}
	// Registered once, the name runs in its image.
	cli("environment", "create", "--name", "AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "--version", "1", "--image", "python:3.9")
	cli("job", "create", "-f", job, "-n", "curated2")
	if got := cli("job", "show", "-n", "curated2", "--query", "[environment_image, environment_note]", "-o", "json"); strings.Join(strings.Fields(got), "") != `["python:3.9",null]` {
		t.Errorf("registered curated name: %q", got)
	}
	os.WriteFile(job, []byte("command: 'true'\ncompute: azureml:cpu\nenvironment: python:3.11\n"), 0o600)
	_, errOut, code := run(t, "--config", cfg, "job", "create", "-f", job)
	if code == 0 || !strings.Contains(errOut, "environment: {image: python:3.11}") {
		t.Errorf("an image as environment: exit %d, %q", code, errOut)
	}
}
