package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// createSized creates a compute of a VM size, min 0.
func (s *server) createSized(name, size string, max int32, idle string) {
	s.t.Helper()
	min := int32(0)
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.VMSize = size
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

// heldGPUs are the devices each node of the computes holds, by node, as
// listNodes says.
func (s *server) heldGPUs(computes ...string) map[string][]string {
	s.t.Helper()
	out := map[string][]string{}
	for _, c := range computes {
		nodes, err := s.c.ListNodes(bctx, c)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, n := range nodes {
			out[n.NodeID] = n.GPUs
		}
	}
	return out
}

// noDeviceTwice fails if two nodes hold one device, and counts them.
func noDeviceTwice(t *testing.T, held map[string][]string) int {
	t.Helper()
	by := map[string]string{}
	for node, ds := range held {
		for _, d := range ds {
			if other, ok := by[d]; ok {
				t.Errorf("GPU %s is held by %s and %s", d, other, node)
			}
			by[d] = node
		}
	}
	return len(by)
}

// TestGPUsOfOneMachine runs a control plane on a machine whose nvidia-smi
// is a stand-in (a test double) reporting four GPUs that do not exist.
// Jobs on 1-, 2- and 4-GPU sizes and a CPU size run at once as far as the
// devices allow: no device is ever given to two nodes (each job marks its
// devices with mkdir, which fails for a device another job holds), a size
// of 8 GPUs is refused, the CPU node sees and reports no GPU, a restarted
// control plane keeps the allocations, a killed node's devices go to the
// next node at once (the heartbeat timeout is far off), the 4-GPU job
// waits with the reason in words and runs when idle nodes are released
// for it, long before their idle time; every job completes.
func TestGPUsOfOneMachine(t *testing.T) {
	bin := t.TempDir()
	if _, err := gputest.StandIn(bin, gputest.Four()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	s := startServer(t, "--usage-interval", "500ms", "--heartbeat-timeout", "10m")

	_, errOut, code := s.cli(t.TempDir(), "compute", "create", "-n", "big", "--size", "Standard_ND96asr_v4", "--max-instances", "1")
	if code == 0 || !strings.Contains(errOut, "vmSize Standard_ND96asr_v4 needs 8 GPUs a node; this machine has at most 4 (4 × NVIDIA H100 80GB HBM3)") {
		t.Fatalf("an 8-GPU size on a 4-GPU machine: exit %d, %q", code, errOut)
	}

	const idle = "PT600S" // far longer than the test: only the early release frees idle nodes
	s.createSized("gpu1", "Standard_NC6s_v3", 2, idle)
	s.createSized("gpu2", "Standard_NC12s_v3", 1, idle)
	s.createSized("cpu", "Standard_DS3_v2", 1, idle)
	work := t.TempDir()
	marks, gate := filepath.Join(work, "marks"), filepath.Join(work, "gate")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	// A job marks its devices, waits for the gate, and unmarks them.
	job := fmt.Sprintf(`echo "devices=[$CUDA_VISIBLE_DEVICES]"; ds=$(echo "$CUDA_VISIBLE_DEVICES" | tr , ' ')
for d in $ds; do mkdir %[1]s/$d || { echo "SHARED $d"; exit 3; }; done
while [ ! -e %[2]s ]; do sleep 0.1; done
for d in $ds; do rmdir %[1]s/$d; done`, marks, gate)
	for _, j := range [][2]string{{"g1a", "gpu1"}, {"g1b", "gpu1"}, {"g2a", "gpu2"}, {"c1", "cpu"}} {
		s.submit(j[0], j[1], job)
	}
	running := func(names ...string) func() bool {
		return func() bool {
			for _, n := range names {
				if s.job(n).Properties.Status != api.JobRunning {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "the first jobs to run", 90*time.Second, running("g1a", "g1b", "g2a", "c1"))
	held := s.heldGPUs("gpu1", "gpu2", "cpu")
	if n := noDeviceTwice(t, held); n != 4 {
		t.Fatalf("%d GPUs held, want all 4: %v", n, held)
	}
	t.Logf("GPUs held: %v", held)

	// The 4-GPU cluster cannot be placed now: nothing is created, and its
	// job and the compute say why.
	s.createSized("gpu4", "Standard_NC24s_v3", 1, idle)
	s.submit("g4", "gpu4", job)
	const why = "needs 4 GPUs; 0 of 4 free: 2 held by nodes of gpu1, 2 held by nodes of gpu2"
	waitFor(t, "g4 to say it waits for GPUs", 30*time.Second, func() bool {
		return s.job("g4").Properties.StatusMessage == api.GPUWaitPrefix+why
	})
	// The compute's status is written after its jobs' reasons, in the
	// same pass: wait for it too.
	waitFor(t, "gpu4 to say why it cannot grow", 30*time.Second, func() bool {
		c, err := s.c.GetCompute(bctx, "gpu4")
		if err != nil {
			return false
		}
		return slices.ContainsFunc(c.Aml().Errors, func(e api.ErrorResponse) bool {
			return e.Error != nil && e.Error.Code == "ScaleUpBlocked" && strings.Contains(e.Error.Message, why)
		})
	})
	if n := len(s.heldGPUs("gpu4")); n != 0 {
		t.Errorf("gpu4 has %d nodes with no GPU free", n)
	}

	// A restarted control plane keeps the allocations.
	s.kill9()
	s.start()
	if after := s.heldGPUs("gpu1", "gpu2", "cpu", "gpu4"); !sameHeld(after, held) {
		t.Errorf("allocations before the restart %v, after %v", held, after)
	}

	// The CPU node sees no GPU and reports none.
	waitFor(t, "a sample of the CPU node", 30*time.Second, func() bool {
		u, err := s.c.ComputeUsage(bctx, "cpu", client.UsageRange{})
		return err == nil && len(u) > 0
	})
	if u, _ := s.c.ComputeUsage(bctx, "cpu", client.UsageRange{}); slices.ContainsFunc(u, func(x api.UsageSample) bool { return len(x.GPUs) > 0 }) {
		t.Errorf("the CPU node reports GPU figures: %+v", u)
	}
	if u, _ := s.c.ComputeUsage(bctx, "gpu2", client.UsageRange{}); len(u) == 0 || len(u[len(u)-1].GPUs) != 2 {
		t.Errorf("the 2-GPU node's figures: %+v, want its 2 GPUs", u)
	}

	// gpu2's node is killed: its job goes back to the queue and the node's
	// devices to the node made for it, long before a heartbeat timeout.
	var gpu2Node string
	for n := range s.heldGPUs("gpu2") {
		gpu2Node = n
	}
	freed := held[gpu2Node]
	pid := agentPID(t, s, gpu2Node)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed node's record to go", 30*time.Second, func() bool { _, ok := s.heldGPUs("gpu2")[gpu2Node]; return !ok })
	for _, d := range freed { // the killed job could not unmark its devices
		os.Remove(filepath.Join(marks, d))
	}
	waitFor(t, "g2a to run again on a new node", 60*time.Second, running("g2a"))
	if n := noDeviceTwice(t, s.heldGPUs("gpu1", "gpu2", "cpu", "gpu4")); n != 4 {
		t.Errorf("%d GPUs held after the kill, want 4", n)
	}

	// The jobs end; their idle nodes hold what g4 waits for and are
	// released for it, with most of their idle time left.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	all := []string{"g1a", "g1b", "g2a", "c1", "g4"}
	waitFor(t, "every job to end", 120*time.Second, func() bool {
		for _, n := range all {
			if !api.JobTerminal(s.job(n).Properties.Status) {
				return false
			}
		}
		return true
	})
	for _, n := range all {
		j := s.job(n)
		log := s.jobLog(n)
		if j.Properties.Status != api.JobCompleted || strings.Contains(log, "SHARED") {
			t.Errorf("job %s: %s %q\n%s", n, j.Properties.Status, j.Properties.StatusMessage, log)
		}
		want := map[string]int{"g1a": 1, "g1b": 1, "g2a": 2, "c1": 0, "g4": 4}[n]
		devs := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(strings.SplitN(log, "\n", 2)[0]), "devices=["), "]")
		t.Logf("job %s saw CUDA_VISIBLE_DEVICES=%q", n, devs)
		if got := len(strings.FieldsFunc(devs, func(r rune) bool { return r == ',' })); got != want {
			t.Errorf("job %s saw CUDA_VISIBLE_DEVICES=%q, want %d devices", n, devs, want)
		}
	}
	if ents, _ := os.ReadDir(marks); len(ents) != 0 {
		t.Errorf("marks left: %v", ents)
	}
}

func sameHeld(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// agentPID is the pid of the process that runs a node's agent (its
// compute's node host: killing it kills the compute's nodes).
func agentPID(t *testing.T, s *server, node string) int {
	t.Helper()
	pid, err := testbin.NodePID(s.dataDir, node)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
