package usage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A node that shares its machine reports its own figures: from its jobs'
// processes where it has no cgroup (the machine's other load is not its),
// else from its cgroup; CPU against its size's vCPUs, memory against its
// size's, and only the GPUs that are its own.
func TestOwnFigures(t *testing.T) {
	proc := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		p := filepath.Join(proc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The machine: 8 CPUs, busy with other nodes' work, 64 GB.
	write("stat", "cpu  0 0 0 1000 0 0 0 0\n"+"cpu0 0\ncpu1 0\ncpu2 0\ncpu3 0\ncpu4 0\ncpu5 0\ncpu6 0\ncpu7 0\n")
	write("meminfo", "MemTotal: 67108864 kB\nMemAvailable: 1000 kB\n")
	write("net/dev", "h\nh\n")
	write("100/stat", stat(100, "init", 10, 100, 0, 0, 0, 0, 100))
	write("101/stat", stat(101, "python", 100, 100, 0, 0, 0, 0, 900))
	write("50/stat", stat(50, "cumulus", 1, 50, 0, 0, 0, 0, 10)) // the agent
	own := &Own{VCPUs: 2, MemoryBytes: 4 << 30, Cgroup: filepath.Join(proc, "no-cgroup"), Agent: 50}
	s := &Sampler{Proc: proc, PageSize: 4096, Own: own, GPUs: []int{1},
		QueryGPUs: func(context.Context) ([]byte, error) { return []byte("0, 99, 1, 2\n1, 10, 3, 4\n2, 99, 5, 6\n"), nil }}
	t0 := time.Unix(1000, 0)
	job := Job{UID: "u1", Attempt: 1, PGID: 100, Started: t0.Add(-time.Second), GPUs: []int{1}}
	u, err := s.Sample(context.Background(), t0, []Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUs != 2 || u.MemoryTotal != 4<<30 || u.MemoryUsed != 1010*4096 {
		t.Errorf("first sample CPUs %d memory %d of %d; want the node's 2 vCPUs, its agent's and job's 1010 pages of 4 GiB", u.CPUs, u.MemoryUsed, u.MemoryTotal)
	}
	if len(u.GPUs) != 1 || u.GPUs[0].Index != 1 {
		t.Errorf("GPU figures %+v, want the node's GPU 1 only", u.GPUs)
	}
	// 10 s later: the machine was all busy, the node's job used 5 CPU
	// seconds: a quarter of its 2 vCPUs.
	write("stat", "cpu  8000 0 0 1000 0 0 0 0\ncpu0 0\ncpu1 0\ncpu2 0\ncpu3 0\ncpu4 0\ncpu5 0\ncpu6 0\ncpu7 0\n")
	write("101/stat", stat(101, "python", 100, 100, 400, 100, 0, 0, 900))
	write("50/stat", stat(50, "cumulus", 1, 50, 100, 0, 0, 0, 10))
	u, err = s.Sample(context.Background(), t0.Add(10*time.Second), []Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU != 0.3 || u.Jobs[0].CPU != 0.25 {
		t.Errorf("node CPU %v, job CPU %v; want 0.3 (job 5 s, agent 1 s of 2 vCPUs over 10 s) and 0.25, whatever the machine's load", u.CPU, u.Jobs[0].CPU)
	}

	// With a cgroup: its CPU time and memory.
	cg := t.TempDir()
	os.WriteFile(filepath.Join(cg, "cpu.stat"), []byte("usage_usec 1000000\nuser_usec 1\n"), 0o644)
	os.WriteFile(filepath.Join(cg, "memory.current"), []byte("123456\n"), 0o644)
	own.Cgroup = cg
	if u, _ = s.Sample(context.Background(), t0.Add(20*time.Second), nil); u.CPU != 0 || u.MemoryUsed != 123456 {
		t.Errorf("first cgroup sample: CPU %v memory %d", u.CPU, u.MemoryUsed)
	}
	os.WriteFile(filepath.Join(cg, "cpu.stat"), []byte("usage_usec 16000000\n"), 0o644)
	if u, _ = s.Sample(context.Background(), t0.Add(30*time.Second), nil); u.CPU != 0.75 || u.Interval != 10*time.Second {
		t.Errorf("cgroup CPU %v over %v; want 15 s of 2 vCPUs over 10 s: 0.75", u.CPU, u.Interval)
	}
}
