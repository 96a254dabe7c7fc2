package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// data create uploads a local folder to the default datastore and
// registers it; list and show read it back (show --label latest the
// newest); a job names it as azureml:NAME@latest; datastore list and
// show name the workspace's containers and never a secret.
func TestDataAndDatastores(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := mustRun(t, cfg)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "numbers", "deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "numbers", "a.txt"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(dir, "numbers", "deep", "b.txt"), []byte("2"), 0o644)
	os.WriteFile(filepath.Join(dir, "data.yml"), []byte("name: numbers\ntype: uri_folder\npath: ./numbers\ndescription: two numbers\n"), 0o644)

	first := cli("data", "create", "-f", filepath.Join(dir, "data.yml"), "--query", "properties.dataUri", "-o", "tsv")
	if !strings.HasPrefix(first, "azureml://datastores/workspaceblobstore/paths/LocalUpload/") || !strings.HasSuffix(first, "/numbers/\n") {
		t.Errorf("first version's uri = %q", first)
	}
	second := cli("data", "create", "--name", "numbers", "--path", filepath.Join(dir, "numbers"), "--query", "[name, properties.dataUri]", "-o", "tsv")
	if second != "2\n"+first {
		t.Errorf("the same content again: %q, want version 2 at %q", second, first)
	}
	if got := cli("data", "show", "--name", "numbers", "--label", "latest", "--query", "name", "-o", "tsv"); got != "2\n" {
		t.Errorf("latest = %q", got)
	}
	if got := cli("data", "list", "--query", "[].[name, properties.latestVersion, properties.dataType]", "-o", "tsv"); got != "numbers\t2\turi_folder\n" {
		t.Errorf("data list = %q", got)
	}
	if got := cli("data", "list", "--name", "numbers", "--query", "[].name", "-o", "tsv"); got != "2\n1\n" {
		t.Errorf("versions = %q", got)
	}
	_, errOut, code := run(t, "--config", cfg, "data", "create", "--name", "x", "--path", filepath.Join(dir, "numbers", "a.txt"))
	if code == 0 || !strings.Contains(errOut, "is a file but type is uri_folder") {
		t.Errorf("a file as a folder: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "data", "create", "--name", "x", "--type", "uri_file", "--path", "azureml://datastores/workspaceblobstore/paths/nothing.csv")
	if code == 0 || !strings.Contains(errOut, "upload the data first") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("nothing there: exit %d, %q", code, errOut)
	}

	cli("compute", "create", "-n", "cpu")
	job := filepath.Join(dir, "job.yml")
	os.WriteFile(job, []byte("command: ls ${{inputs.n}}\ncompute: azureml:cpu\ninputs:\n  n:\n    type: uri_folder\n    path: azureml:numbers@latest\noutputs:\n  out: {type: uri_folder}\n"), 0o600)
	cli("job", "create", "-f", job, "-n", "j1")
	got := cli("job", "show", "-n", "j1", "--query", "[inputs.n.datastore_path, outputs.out.path]", "-o", "tsv")
	if want := first + "azureml://datastores/workspaceblobstore/paths/azureml/j1/out/\n"; got != want {
		t.Errorf("job data = %q, want %q", got, want)
	}

	if got := cli("datastore", "list", "--query", "[].[name, properties.isDefault]", "-o", "tsv"); got != "workspaceartifactstore\tfalse\nworkspaceblobstore\ttrue\n" {
		t.Errorf("datastore list = %q", got)
	}
	if got := cli("datastore", "show", "--name", "workspaceblobstore", "-o", "json"); strings.Contains(got, "sig=") || !strings.Contains(got, `"credentialsType": "Sas"`) {
		t.Errorf("datastore show = %s", got)
	}
}
