package gpu

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
)

func TestParse(t *testing.T) {
	out := "0, NVIDIA H100 80GB HBM3, GPU-5d3c9a4e-1f2b-4c3d-9e8f-0a1b2c3d4e5f, 81559\n" +
		"1, Tesla T4, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, 15360\n" +
		"\n" +
		"2, Weird, Name, With Commas, GPU-1, [N/A]\n"
	got, err := Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []agentapi.GPU{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-5d3c9a4e-1f2b-4c3d-9e8f-0a1b2c3d4e5f", Memory: 81559},
		{Index: 1, Name: "Tesla T4", UUID: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", Memory: 15360},
		{Index: 2, Name: "Weird, Name, With Commas", UUID: "GPU-1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseEmpty(t *testing.T) {
	got, err := Parse(nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("Parse(nil) = %v, %v; want none", got, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"0, only two",
		"x, Tesla T4, GPU-1, 100",
		"0, Tesla T4, GPU-1, lots",
		"No devices were found", // nvidia-smi's text when the driver sees none
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", in)
		}
	}
}

func TestDetect(t *testing.T) {
	// With nvidia-smi absent this is a no-op; where it exists it must parse.
	if _, err := Detect(context.Background()); err != nil {
		t.Logf("Detect: %v (a machine with a broken driver)", err)
	}
}

func TestParseListAndWithMIG(t *testing.T) {
	list := "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa)\n" +
		"  MIG 3g.40gb     Device  0: (UUID: MIG-1111)\n" +
		"  MIG 1g.10gb+me  Device  1: (UUID: MIG-2222)\n" +
		"GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb)\n"
	migs, err := ParseList([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	want := []MIGInstance{{GPU: 0, Device: 0, Profile: "3g.40gb", UUID: "MIG-1111"}, {GPU: 0, Device: 1, Profile: "1g.10gb+me", UUID: "MIG-2222"}}
	if !reflect.DeepEqual(migs, want) {
		t.Fatalf("ParseList = %+v, want %+v", migs, want)
	}
	gpus := []agentapi.GPU{{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-aaaa", Memory: 81920}, {Index: 1, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-bbbb", Memory: 81920}}
	got := WithMIG(gpus, migs)
	wantDevs := []agentapi.GPU{
		{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "MIG-1111", Memory: 40 * 1024, MIG: "3g.40gb"},
		{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "MIG-2222", Memory: 10 * 1024, MIG: "1g.10gb+me", MIGDevice: 1},
		gpus[1],
	}
	if !reflect.DeepEqual(got, wantDevs) {
		t.Fatalf("WithMIG =\n %+v\nwant\n %+v", got, wantDevs)
	}
	if ids := IDs(got); !reflect.DeepEqual(ids, []string{"0:0", "0:1", "1"}) {
		t.Errorf("IDs = %v", ids)
	}
	if v := Visible(got[1]); v != "MIG-2222" {
		t.Errorf("a MIG instance is visible to CUDA by its UUID, got %q", v)
	}
	if v := Visible(got[2]); v != "1" {
		t.Errorf("a whole GPU is visible to CUDA by its index, got %q", v)
	}
	if !Names(got[1], "0:1") || !Names(got[1], "mig-2222") || Names(got[1], "0") || !Names(got[2], "1") || !Names(got[2], "GPU-bbbb") {
		t.Error("Names does not know a device by its ID, index or UUID")
	}
	if _, err := ParseList([]byte("  MIG 1g.10gb Device 0: (UUID: MIG-1)\n")); err == nil {
		t.Error("a MIG line before any GPU was accepted")
	}
}

func TestModelMatches(t *testing.T) {
	for _, c := range []struct {
		model, name string
		want        bool
	}{
		{"V100", "Tesla V100-SXM2-16GB", true},
		{"A100", "NVIDIA A100-SXM4-80GB", true},
		{"h100", "NVIDIA H100 80GB HBM3", true},
		{"T4", "Tesla T4", true},
		{"T4", "NVIDIA RTX A4000", false},
		{"A100", "NVIDIA A10", false},
		{"", "anything", true},
	} {
		if got := ModelMatches(c.model, c.name); got != c.want {
			t.Errorf("ModelMatches(%q, %q) = %v, want %v", c.model, c.name, got, c.want)
		}
	}
}

func TestCheckSize(t *testing.T) {
	four := gputest.Four()
	for _, c := range []struct {
		name  string
		m     Machine
		gpus  int
		model string
		want  string // "" fits
	}{
		{"fits", Machine{Devices: four}, 4, "V100", ""},
		{"CPU size on no GPU", Machine{}, 0, "", ""},
		{"more than the machine has", Machine{Devices: four}, 8, "A100",
			"vmSize S needs 8 GPUs a node; this machine has at most 4 (4 × NVIDIA H100 80GB HBM3)"},
		{"no GPU at all", Machine{}, 1, "V100", "vmSize S needs 1 GPU a node; this machine has no GPU"},
		{"no GPU the nodes can use", Machine{Why: "the Docker engine cannot give containers GPUs"}, 1, "V100",
			"vmSize S needs 1 GPU a node; this machine has no GPU its nodes can use: the Docker engine cannot give containers GPUs"},
		{"strict: none of the model", Machine{Devices: four, Match: MatchStrict}, 1, "V100",
			"vmSize S needs 1 V100 GPU a node; this machine has none of that model (it has 4 × NVIDIA H100 80GB HBM3; GPU models are matched strictly: serve --gpu-model-match count takes any)"},
		{"strict: the model fits", Machine{Devices: four, Match: MatchStrict}, 4, "H100", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.m.CheckSize("S", c.gpus, c.model)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("CheckSize:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestPool(t *testing.T) {
	m := Machine{Devices: append(gputest.Whole(2, "Tesla V100-SXM2-16GB"), gputest.Whole(2, "NVIDIA H100 80GB HBM3")...)}
	m.Devices[2].Index, m.Devices[3].Index = 2, 3
	p := NewPool(m)
	if refused := p.Hold(Holder{Node: "old", Compute: "c/gpu-a"}, []string{"1", "9"}); !reflect.DeepEqual(refused, []string{"9"}) {
		t.Errorf("Hold refused %v, want the unknown device 9", refused)
	}
	a, ok := p.Take(Holder{Node: "n1", Compute: "c/gpu-b"}, 2, "")
	if !ok || !reflect.DeepEqual(IDs(a), []string{"0", "2"}) {
		t.Fatalf("Take 2 = %v %v, want the free 0 and 2", IDs(a), ok)
	}
	if _, ok := p.Take(Holder{Node: "n2", Compute: "c/gpu-b"}, 2, ""); ok {
		t.Fatal("took 2 devices with 1 free")
	}
	if s := p.Supply(""); s.Free != 1 || s.Total != 4 || !reflect.DeepEqual(s.Held, []Held{{"c/gpu-b", 2}, {"c/gpu-a", 1}}) {
		t.Errorf("Supply = %+v", s)
	}
	if refused := p.Hold(Holder{Node: "other", Compute: "c/gpu-c"}, []string{"0"}); len(refused) != 1 {
		t.Error("a device another node holds was held twice")
	}
	p.Release("n1")
	if s := p.Supply(""); s.Free != 3 {
		t.Errorf("after release: %d free, want 3", s.Free)
	}
	strict := NewPool(Machine{Devices: m.Devices, Match: MatchStrict})
	got, ok := strict.Take(Holder{Node: "n3"}, 2, "H100")
	if !ok || !reflect.DeepEqual(IDs(got), []string{"2", "3"}) {
		t.Errorf("strict Take of H100 = %v %v, want 2 and 3", IDs(got), ok)
	}
	if s := strict.Supply("V100"); s.Free != 2 || s.Total != 2 {
		t.Errorf("strict V100 supply = %+v, want 2 of 2", s)
	}
	if !reflect.DeepEqual(IDs(strict.HeldBy("n3")), []string{"2", "3"}) {
		t.Errorf("HeldBy = %v", IDs(strict.HeldBy("n3")))
	}
}

// TestNvidiaSMIStandIn reads the inventory through a stand-in nvidia-smi
// (a test double) as Cumulus reads a real one: whole GPUs, a GPU split in
// MIG instances, and a driver that sees no device.
func TestNvidiaSMIStandIn(t *testing.T) {
	dir := t.TempDir()
	ds := gputest.Four()
	ds[1] = agentapi.GPU{Index: 1, Name: ds[1].Name, UUID: "MIG-aaaa", Memory: 20 * 1024, MIG: "2g.20gb"}
	ds = append(ds[:2], append([]agentapi.GPU{{Index: 1, Name: ds[1].Name, UUID: "MIG-bbbb", Memory: 20 * 1024, MIG: "2g.20gb", MIGDevice: 1}}, ds[2:]...)...)
	path, err := gputest.StandIn(dir, ds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NvidiaSMI{Path: path}.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ds) {
		t.Fatalf("Devices =\n %+v\nwant\n %+v", got, ds)
	}
	none, err := gputest.StandIn(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := (NvidiaSMI{Path: none}).Devices(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("a driver without devices: %v, %v; want none and no error", got, err)
	}
	if got, err := (NvidiaSMI{Path: filepath.Join(dir, "absent")}).Devices(context.Background()); err != nil || got != nil {
		t.Errorf("no nvidia-smi: %v, %v; want none and no error", got, err)
	}
}
