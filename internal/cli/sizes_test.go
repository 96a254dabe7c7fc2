package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
)

// A sizes file adds sizes of one's own hardware: list-sizes shows them,
// a cluster of one is created, its family has a quota, and a GPU size of
// the file is refused on a machine without GPUs like Azure's are.
func TestSizesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sizes.yaml")
	if err := os.WriteFile(file, []byte(`sizes:
  - {name: Lab_CPU16, family: labCPUFamily, vCPUs: 16, memoryGB: 64, price: 0.40}
  - {name: Lab_A100x2, family: labA100Family, vCPUs: 32, memoryGB: 256, gpus: 2, gpuModel: A100, price: 4.10}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A machine without GPUs, wherever the test runs: a stand-in
	// nvidia-smi (a test double) whose driver sees none.
	bin := t.TempDir()
	if _, err := gputest.StandIn(bin, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.AgentCommand = []string{"true"}; o.SizesFile = file })
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, append([]string{"--config", cfg}, args...)...)
	}
	out, errOut, code := cli("compute", "list-sizes", "--gpu")
	if code != 0 || !strings.Contains(out, "Lab_A100x2") || strings.Contains(out, "Lab_CPU16") || !strings.Contains(out, "labA100Family") {
		t.Errorf("list-sizes --gpu: %d %s\n%s", code, errOut, out)
	}
	if _, errOut, code := cli("compute", "create", "-n", "lab", "--size", "Lab_CPU16", "--max-instances", "2"); code != 0 {
		t.Fatalf("create on a size of the file: %s", errOut)
	}
	if out, errOut, code := cli("quota", "list"); code != 0 || !strings.Contains(out, "labCPUFamily") {
		t.Errorf("quota list lacks the file's family: %d %s\n%s", code, errOut, out)
	}
	_, errOut, code = cli("compute", "create", "-n", "lab-gpu", "--size", "Lab_A100x2")
	if code == 0 || !strings.Contains(errOut, "vmSize Lab_A100x2 needs 2 GPUs a node; this machine has no GPU") {
		t.Errorf("a GPU size of the file on a machine without GPUs: %d %q", code, errOut)
	}
}
