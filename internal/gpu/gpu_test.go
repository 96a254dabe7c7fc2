package gpu

import (
	"context"
	"reflect"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
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
