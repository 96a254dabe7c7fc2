package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/sim"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.csv")
	if err := os.WriteFile(path, []byte("submit_time_s,duration_s,gpus,vc,extra\n0,1000,1,a,x\n1130,200,1,a,y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"sim", "--trace", path, "--size", "Standard_NC6s_v3", "--idle", "60s", "--provision-delay", "100s", "--deletion-delay", "10s"}

	// One run as JSON: the hand-computed "job arriving during the idle
	// window" case of the sim package.
	out, errs, code := runCLI(t, append(base, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r sim.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if math.Abs(r.Total.BilledNodeHours*3600-1400) > 1e-6 || r.Total.QueueDelay.Mean != 50 || r.Total.ColdStarts != 1 || r.Timeline != nil {
		t.Errorf("result %+v", r.Total)
	}

	// A sweep as a table, with the cost-delay plot.
	plot := filepath.Join(dir, "sweep.svg")
	out, errs, code = runCLI(t, append(base, "--sweep", "idle=0,60,adaptive", "--plot", plot)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SETTING") || !strings.HasPrefix(lines[3], "adaptive") {
		t.Errorf("table:\n%s", out)
	}
	if b, err := os.ReadFile(plot); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("plot: %v", err)
	}

	// A single run with a timeline plot.
	plot = filepath.Join(dir, "timeline.svg")
	if _, errs, code = runCLI(t, append(base, "--plot", plot)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(plot); err != nil || !bytes.Contains(b, []byte("nodes against demand")) {
		t.Errorf("timeline plot: %v", err)
	}

	// Errors are one line that says what to fix.
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("submit_time_s,duration_s\n0,10\n5,ten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--trace", bad}, `line 3: duration_s "ten" is not a number of seconds`},
		{[]string{"sim", "--trace", path}, "pass a GPU size"},
		{[]string{"sim"}, "--trace is required"},
		{append(base, "--sweep", "speed=1"), "sweep key"},
		{append(base, "--tier", "gold"), "tier"},
		{append(base, "--eviction-rate", "1"), "low_priority"},
		{append(base, "--vc", "zz"), "no job of the trace has that vc"},
	} {
		_, errs, code := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestSimGenerate(t *testing.T) {
	out, errs, code := runCLI(t, "sim", "generate", "diurnal", "--jobs", "50", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	tr, err := sim.ReadTrace(strings.NewReader(out))
	if err != nil || len(tr.Jobs) != 50 || !tr.HasGPUs || !tr.HasVC {
		t.Errorf("generated trace: %v, %d jobs", err, len(tr.Jobs))
	}
	again, _, _ := runCLI(t, "sim", "generate", "diurnal", "--jobs", "50", "--seed", "3")
	if again != out {
		t.Error("one seed generated two traces")
	}
	if _, _, code := runCLI(t, "sim", "generate", "weekly"); code == 0 {
		t.Error("unknown kind: exit 0")
	}
}

// A small run's cost shows in cents, not rounded to whole dollars.
func TestSimTableCostInCents(t *testing.T) {
	var out strings.Builder
	simTable([]*sim.Result{{Label: "idle=0", Total: sim.Metrics{Cluster: "cpu", Jobs: 1, Cost: 0.137}}}, false).print(&out)
	if lines := strings.Split(out.String(), "\n"); len(lines) < 2 || strings.Fields(lines[1])[6] != "0.14" {
		t.Errorf("sim table:\n%s", out.String())
	}
}
