// Package gpu finds the accelerators of the machine it runs on.
package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// QueryArgs are the nvidia-smi arguments whose output Parse reads.
var QueryArgs = []string{"--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader,nounits"}

// Detect lists the NVIDIA GPUs of this machine with nvidia-smi. It returns
// no GPUs and no error when nvidia-smi is not installed.
func Detect(ctx context.Context) ([]agentapi.GPU, error) {
	bin, err := exec.LookPath("nvidia-smi")
	if errors.Is(err, exec.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find nvidia-smi: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, QueryArgs...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return Parse(out)
}

// Parse reads the output of
// `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits`:
// one line per GPU, fields separated by ", ". A memory of "[N/A]" reads
// as 0; blank lines are skipped.
func Parse(out []byte) ([]agentapi.GPU, error) {
	rows, err := Rows(out, "index, name, uuid, memory")
	if err != nil {
		return nil, err
	}
	var gpus []agentapi.GPU
	for _, r := range rows {
		f, n, idx := r.Fields, r.Line, r.Index
		// A name could hold a comma; the uuid and memory are always the
		// last two fields.
		g := agentapi.GPU{
			Index: idx,
			Name:  strings.Join(f[1:len(f)-2], ", "),
			UUID:  f[len(f)-2],
		}
		if mem := f[len(f)-1]; mem != "" && !strings.HasPrefix(mem, "[") {
			m, err := strconv.ParseFloat(mem, 64)
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi line %d: memory %q is not a number", n, mem)
			}
			g.Memory = int64(m)
		}
		if strings.HasPrefix(g.UUID, "[") {
			g.UUID = ""
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// Row is one GPU's line of nvidia-smi's CSV output: its line number, its
// fields trimmed, and the first field, the GPU's index, read.
type Row struct {
	Line   int
	Fields []string
	Index  int
}

// Rows splits the output of an nvidia-smi --query-gpu with
// --format=csv,noheader,nounits into rows, blank lines skipped; fields
// names the query's fields (comma-separated) for errors, and each row has
// at least that many.
func Rows(out []byte, fields string) ([]Row, error) {
	want := strings.Count(fields, ",") + 1
	var rows []Row
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < want {
			return nil, fmt.Errorf("nvidia-smi line %d: want %d fields (%s), got %q", n, want, fields, line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q is not a number", n, f[0])
		}
		rows = append(rows, Row{Line: n, Fields: f, Index: idx})
	}
	return rows, sc.Err()
}
