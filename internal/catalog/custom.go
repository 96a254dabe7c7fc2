package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// A sizes file describes sizes of one's own hardware, beside Azure's:
//
//	sizes:
//	  - name: Lab_A100x2
//	    family: labA100Family
//	    vCPUs: 32
//	    memoryGB: 256
//	    gpus: 2
//	    gpuModel: A100
//	    price: 4.10              # per node-hour, in the catalogue's currency (USD)
//	    lowPriorityPrice: 1.20   # optional: set, the size may serve low-priority clusters
//
// Its sizes are listed, priced, counted in quotas (by family) and used by
// clusters like the catalogue's.
type sizesFile struct {
	Sizes []fileSize `yaml:"sizes"`
}

type fileSize struct {
	Name             string   `yaml:"name"`
	Family           string   `yaml:"family"`
	VCPUs            int      `yaml:"vCPUs"`
	MemoryGB         float64  `yaml:"memoryGB"`
	GPUs             int      `yaml:"gpus"`
	GPUModel         string   `yaml:"gpuModel"`
	Price            float64  `yaml:"price"`
	LowPriorityPrice *float64 `yaml:"lowPriorityPrice"`
	OSDiskMB         int      `yaml:"osDiskMB"`
	TempDiskMB       int      `yaml:"tempDiskMB"`
}

// ParseSizes reads a sizes file (see sizesFile): every size needs a name
// of letters, digits, '_', '-' and '.', a family, at least one vCPU and
// some memory; GPUs and prices may not be negative, and a size with GPUs
// names their model. Unknown keys are errors.
func ParseSizes(b []byte) ([]Size, error) {
	var f sizesFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("sizes file: %w", err)
	}
	var out []Size
	var errs []error
	seen := map[string]bool{}
	for i, fs := range f.Sizes {
		s := Size{Name: fs.Name, Family: fs.Family, VCPUs: fs.VCPUs, MemoryGB: fs.MemoryGB, GPUs: fs.GPUs, GPUModel: fs.GPUModel,
			Price: fs.Price, OSDiskMB: fs.OSDiskMB, TempDiskMB: fs.TempDiskMB}
		if fs.LowPriorityPrice != nil {
			s.LowPriority, s.LowPrice = true, *fs.LowPriorityPrice
		}
		if s.OSDiskMB == 0 {
			s.OSDiskMB = 1047552
		}
		what := fmt.Sprintf("size %d (%s)", i+1, s.Name)
		switch {
		case !validName(s.Name):
			errs = append(errs, fmt.Errorf("%s: name must be 1 to 64 letters, digits, '_', '-' or '.'", what))
		case seen[strings.ToLower(s.Name)]:
			errs = append(errs, fmt.Errorf("%s: named twice", what))
		case !validName(s.Family):
			errs = append(errs, fmt.Errorf("%s: family must be 1 to 64 letters, digits, '_', '-' or '.' (quotas count cores by family)", what))
		case s.VCPUs < 1 || s.MemoryGB <= 0:
			errs = append(errs, fmt.Errorf("%s: needs at least 1 vCPU and some memory (vCPUs %d, memoryGB %g)", what, s.VCPUs, s.MemoryGB))
		case s.GPUs < 0 || s.Price < 0 || s.LowPrice < 0:
			errs = append(errs, fmt.Errorf("%s: GPUs and prices may not be negative", what))
		case s.GPUs > 0 && s.GPUModel == "":
			errs = append(errs, fmt.Errorf("%s: has %d GPUs but no gpuModel", what, s.GPUs))
		}
		seen[strings.ToLower(s.Name)] = true
		out = append(out, s)
	}
	if len(f.Sizes) == 0 {
		errs = append(errs, errors.New("sizes file: no sizes (a list under 'sizes:')"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

var addMu sync.Mutex

// Add puts sizes of one's own hardware into the catalogue, beside Azure's
// (a server does it once, as it starts). A name the catalogue has already
// is refused unless it is the same size (adding a file again changes
// nothing), as is a family of Azure's: a size of one's own is not counted
// against an Azure family's quota.
func Add(more []Size) error {
	addMu.Lock()
	defer addMu.Unlock()
	t := current.Load()
	azure := map[string]bool{}
	for _, s := range t.sizes[:builtin] {
		azure[strings.ToLower(s.Family)] = true
	}
	var add []Size
	for _, s := range more {
		if have, ok := t.byLower[strings.ToLower(s.Name)]; ok {
			if *have != s {
				return fmt.Errorf("size %s is already in the catalogue (as %s, %d vCPUs, %g GB, %d GPUs): give yours another name", s.Name, have.Name, have.VCPUs, have.MemoryGB, have.GPUs)
			}
			continue
		}
		if azure[strings.ToLower(s.Family)] {
			return fmt.Errorf("size %s: family %s is one of Azure's: give sizes of your own hardware a family of their own", s.Name, s.Family)
		}
		add = append(add, s)
	}
	if len(add) > 0 {
		current.Store(newTable(append(append([]Size(nil), t.sizes...), add...)))
	}
	return nil
}
