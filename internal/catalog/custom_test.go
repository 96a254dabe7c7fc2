package catalog

import (
	"slices"
	"strings"
	"testing"
)

const labSizes = `
sizes:
  - name: Lab_A100x2
    family: labA100Family
    vCPUs: 32
    memoryGB: 256
    gpus: 2
    gpuModel: A100
    price: 4.10
    lowPriorityPrice: 1.20
  - name: Lab_CPU16
    family: labCPUFamily
    vCPUs: 16
    memoryGB: 64
    price: 0.40
`

func TestSizesFile(t *testing.T) {
	got, err := ParseSizes([]byte(labSizes))
	if err != nil {
		t.Fatal(err)
	}
	want := []Size{
		{Name: "Lab_A100x2", Family: "labA100Family", VCPUs: 32, MemoryGB: 256, GPUs: 2, GPUModel: "A100", LowPriority: true, Price: 4.10, LowPrice: 1.20, OSDiskMB: 1047552},
		{Name: "Lab_CPU16", Family: "labCPUFamily", VCPUs: 16, MemoryGB: 64, Price: 0.40, OSDiskMB: 1047552},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ParseSizes =\n %+v\nwant\n %+v", got, want)
	}
	if err := Add(got); err != nil {
		t.Fatal(err)
	}
	if err := Add(got); err != nil {
		t.Errorf("adding the same sizes again: %v", err)
	}
	s, ok := Lookup("lab_a100x2")
	if !ok || s.GPUs != 2 || s.HourlyPrice(true) != 1.20 {
		t.Errorf("Lookup = %+v %v", s, ok)
	}
	if !slices.Contains(Families(), "labA100Family") {
		t.Errorf("Families %v lack the file's", Families())
	}
	all := All()
	if all[len(all)-1].Name != "Lab_CPU16" || all[0].Name != "Standard_D2_v2" {
		t.Errorf("All: Azure's first, then one's own; got %s … %s", all[0].Name, all[len(all)-1].Name)
	}
	changed := got[0]
	changed.GPUs = 4
	if err := Add([]Size{changed}); err == nil || !strings.Contains(err.Error(), "already in the catalogue") {
		t.Errorf("a different size under a name taken: %v", err)
	}
	if err := Add([]Size{{Name: "Lab_X", Family: "standardNCSv3Family", VCPUs: 1, MemoryGB: 1}}); err == nil || !strings.Contains(err.Error(), "one of Azure's") {
		t.Errorf("a size of one's own in an Azure family: %v", err)
	}
}

func TestSizesFileErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"sizes: []", "no sizes"},
		{"sizes:\n  - {name: 'a b', family: f, vCPUs: 1, memoryGB: 1}", "name must be"},
		{"sizes:\n  - {name: a, vCPUs: 1, memoryGB: 1}", "family must be"},
		{"sizes:\n  - {name: a, family: f, vCPUs: 0, memoryGB: 1}", "at least 1 vCPU"},
		{"sizes:\n  - {name: a, family: f, vCPUs: 1, memoryGB: 1, gpus: 2}", "no gpuModel"},
		{"sizes:\n  - {name: a, family: f, vCPUs: 1, memoryGB: 1, price: -1}", "may not be negative"},
		{"sizes:\n  - {name: a, family: f, vCPUs: 1, memoryGB: 1}\n  - {name: A, family: f, vCPUs: 1, memoryGB: 1}", "named twice"},
		{"sizes:\n  - {name: a, family: f, vCPUs: 1, memoryGB: 1, cores: 3}", "field cores not found"},
	} {
		if _, err := ParseSizes([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSizes(%q) = %v, want an error saying %q", c.yaml, err, c.want)
		}
	}
}
