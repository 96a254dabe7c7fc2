// Package gpu knows a machine's accelerators: what there is (an Inventory,
// read through nvidia-smi today), how a device is named (ID, Visible), how a
// size's GPU model is matched against it, and who holds which (Pool, pure).
package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Inventory lists the allocatable accelerators of a machine: whole GPUs,
// and the MIG instances of a GPU in MIG mode in its place. NvidiaSMI is the
// one there is; NVML or AMD's tools can stand beside it.
type Inventory interface {
	Devices(ctx context.Context) ([]agentapi.GPU, error)
}

// NvidiaSMI reads the inventory with nvidia-smi. Path is the program (""
// = nvidia-smi on PATH); when it is not installed the machine has no
// devices, and that is no error.
type NvidiaSMI struct{ Path string }

var _ Inventory = NvidiaSMI{}

// QueryArgs are the nvidia-smi arguments whose output Parse reads;
// ListArgs those whose output ParseList reads (the MIG instances).
var (
	QueryArgs = []string{"--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader,nounits"}
	ListArgs  = []string{"-L"}
)

// Devices lists the machine's devices: the GPUs of --query-gpu, each GPU
// that has MIG instances (nvidia-smi -L) replaced by them.
func (n NvidiaSMI) Devices(ctx context.Context) ([]agentapi.GPU, error) {
	bin := n.Path
	if bin == "" {
		bin = "nvidia-smi"
	}
	path, err := exec.LookPath(bin)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find nvidia-smi: %w", err)
	}
	out, err := run(ctx, path, QueryArgs...)
	if errors.Is(err, errNoDevices) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	gpus, err := Parse(out)
	if err != nil || len(gpus) == 0 {
		return gpus, err
	}
	list, err := run(ctx, path, ListArgs...)
	if err != nil {
		return nil, err
	}
	migs, err := ParseList(list)
	if err != nil {
		return nil, err
	}
	return WithMIG(gpus, migs), nil
}

// errNoDevices is nvidia-smi failing because the driver sees no device.
var errNoDevices = errors.New("no devices were found")

func run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if bytes.Contains(out, []byte("No devices were found")) || bytes.Contains(stderr.Bytes(), []byte("No devices were found")) {
			return nil, errNoDevices
		}
		return nil, fmt.Errorf("nvidia-smi %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Detect lists the devices of this machine with nvidia-smi on PATH (see
// NvidiaSMI.Devices).
func Detect(ctx context.Context) ([]agentapi.GPU, error) { return NvidiaSMI{}.Devices(ctx) }

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

// MIGInstance is one MIG device that `nvidia-smi -L` lists under a GPU.
type MIGInstance struct {
	GPU     int    // the GPU's index
	Device  int    // its device number on that GPU
	Profile string // e.g. "1g.10gb"
	UUID    string
}

// The lines of `nvidia-smi -L`, compiled at their first use.
var (
	listGPU = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^GPU (\d+):`) })
	listMIG = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^)\s]+)\)`)
	})
)

// ParseList reads the MIG instances from the output of `nvidia-smi -L`:
//
//	GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d…)
//	  MIG 3g.40gb     Device  0: (UUID: MIG-1b…)
//
// Lines it does not know are skipped; a MIG line before any GPU line is
// an error.
func ParseList(out []byte) ([]MIGInstance, error) {
	var migs []MIGInstance
	gpu := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := listGPU().FindStringSubmatch(line); m != nil {
			gpu, _ = strconv.Atoi(m[1])
			continue
		}
		m := listMIG().FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if gpu < 0 {
			return nil, fmt.Errorf("nvidia-smi -L line %d: a MIG device before any GPU: %q", n, line)
		}
		dev, _ := strconv.Atoi(m[2])
		migs = append(migs, MIGInstance{GPU: gpu, Device: dev, Profile: m[1], UUID: m[3]})
	}
	return migs, sc.Err()
}

// WithMIG returns gpus with each GPU that has MIG instances replaced by
// them, in place: a GPU in MIG mode is used only through its instances.
// An instance's memory is its profile's ("3g.40gb": 40 GiB).
func WithMIG(gpus []agentapi.GPU, migs []MIGInstance) []agentapi.GPU {
	if len(migs) == 0 {
		return gpus
	}
	out := make([]agentapi.GPU, 0, len(gpus)+len(migs))
	for _, g := range gpus {
		split := false
		for _, m := range migs {
			if m.GPU != g.Index {
				continue
			}
			split = true
			out = append(out, agentapi.GPU{Index: g.Index, Name: g.Name, UUID: m.UUID, Memory: profileMemory(m.Profile),
				MIG: m.Profile, MIGDevice: m.Device})
		}
		if !split {
			out = append(out, g)
		}
	}
	return out
}

// profileMemory is the memory of a MIG profile such as "1g.10gb" or
// "1g.5gb+me", in MiB (0 when it names none).
func profileMemory(profile string) int64 {
	_, rest, ok := strings.Cut(profile, ".")
	if !ok {
		return 0
	}
	rest, _, _ = strings.Cut(rest, "+")
	gb, ok := strings.CutSuffix(strings.ToLower(rest), "gb")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(gb, 64)
	if err != nil {
		return 0
	}
	return int64(v * 1024)
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
