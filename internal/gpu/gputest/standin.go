// Package gputest is for tests of machines without GPUs: StandIn writes a
// stand-in nvidia-smi, a test double that reports GPUs which do not exist.
package gputest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Four are four whole GPUs of one model, as a stand-in reports them.
func Four() []agentapi.GPU { return Whole(4, "NVIDIA H100 80GB HBM3") }

// Whole are n whole GPUs of one model with made-up UUIDs.
func Whole(n int, name string) []agentapi.GPU {
	out := make([]agentapi.GPU, n)
	for i := range out {
		out[i] = agentapi.GPU{Index: i, Name: name, UUID: fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", i), Memory: 81559}
	}
	return out
}

// StandIn writes, in dir, an executable named nvidia-smi that stands in
// for NVIDIA's: a test double answering the queries Cumulus makes
// (gpu.QueryArgs, gpu.ListArgs, usage.GPUQueryArgs) as a machine with the
// devices ds would (a MIG instance listed under its GPU, which it replaces
// in --query-gpu only as nvidia-smi does: its GPU is still listed there),
// reporting every GPU idle. Any other arguments fail. It returns the
// program's path; put dir first on PATH for processes to use it.
func StandIn(dir string, ds []agentapi.GPU) (string, error) {
	var query, list, util strings.Builder
	seen := map[int]bool{}
	for _, d := range ds {
		if !seen[d.Index] {
			seen[d.Index] = true
			uuid := d.UUID
			if d.MIG != "" {
				uuid = fmt.Sprintf("GPU-00000000-0000-4000-9000-%012d", d.Index)
			}
			mem := d.Memory
			if d.MIG != "" || mem == 0 {
				mem = 81559
			}
			fmt.Fprintf(&query, "%d, %s, %s, %d\n", d.Index, d.Name, uuid, mem)
			fmt.Fprintf(&list, "GPU %d: %s (UUID: %s)\n", d.Index, d.Name, uuid)
			fmt.Fprintf(&util, "%d, 0, 0, %d\n", d.Index, mem)
		}
		if d.MIG != "" {
			fmt.Fprintf(&list, "  MIG %-11s Device %2d: (UUID: %s)\n", d.MIG, d.MIGDevice, d.UUID)
		}
	}
	script := "#!/bin/sh\n" +
		"# A stand-in for nvidia-smi (a test double): it reports GPUs that do not exist.\n" +
		"case \"$*\" in\n" +
		"'--query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits') printf '%s' '" + query.String() + "' ;;\n" +
		"'-L') printf '%s' '" + list.String() + "' ;;\n" +
		"'--query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits') printf '%s' '" + util.String() + "' ;;\n" +
		"*) echo \"stand-in nvidia-smi: arguments not stood in for: $*\" >&2; exit 2 ;;\n" +
		"esac\n"
	if len(ds) == 0 {
		script = "#!/bin/sh\n# A stand-in for nvidia-smi (a test double) on a machine whose driver sees no GPU.\necho 'No devices were found'\nexit 6\n"
	}
	path := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}
