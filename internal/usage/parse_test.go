package usage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseStatAndCPUUtilization(t *testing.T) {
	before := "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 50 0 50 350 50 0 0 0 0 0\ncpu1 50 0 50 350 50 0 0 0 0 0\nintr 1 2 3\n"
	after := "cpu  250 0 150 750 150 0 0 0 0 0\ncpu0 1 0 0 0 0 0 0 0 0 0\ncpu1 1 0 0 0 0 0 0 0 0 0\n"
	t0, cpus, err := ParseStat([]byte(before))
	if err != nil || cpus != 2 || t0.Total != 1000 || t0.Busy != 200 {
		t.Fatalf("before: %+v %d %v", t0, cpus, err)
	}
	t1, _, err := ParseStat([]byte(after))
	if err != nil {
		t.Fatal(err)
	}
	// 200 busy ticks of 300: user +150, system +50, idle +50, iowait +50.
	if got := CPUUtilization(t0, t1); got < 0.666 || got > 0.667 {
		t.Errorf("utilization = %v, want 2/3", got)
	}
	if got := CPUUtilization(t1, t0); got != 0 {
		t.Errorf("counters going back = %v, want 0", got)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 x 3 4\n", "cpu 1 2\n"} {
		if _, _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) gave no error", bad)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		used, total int64
		bad         bool
	}{
		{name: "MemAvailable", in: "MemTotal:       16000 kB\nMemFree:  1000 kB\nMemAvailable:   12000 kB\nCached: 9000 kB\n", used: 4000 * 1024, total: 16000 * 1024},
		{name: "old kernel", in: "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 100 kB\nCached: 300 kB\n", used: 500 * 1024, total: 1000 * 1024},
		{name: "no total", in: "MemFree: 100 kB\n", bad: true},
		{name: "not a number", in: "MemTotal: lots kB\n", bad: true},
	} {
		used, total, err := ParseMeminfo([]byte(tc.in))
		if tc.bad != (err != nil) || used != tc.used || total != tc.total {
			t.Errorf("%s: %d/%d, %v; want %d/%d", tc.name, used, total, err, tc.used, tc.total)
		}
	}
}

func TestParseNetDev(t *testing.T) {
	const header = "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
	for _, tc := range []struct {
		name, in string
		rx, tx   int64
	}{
		{"two interfaces", header +
			"    lo: 5000      50    0    0    0     0          0         0     5000      50    0    0    0     0       0          0\n" +
			"  eth0: 1000      10    0    0    0     0          0         0      200       2    0    0    0     0       0          0\n" +
			"docker0:  30       1    0    0    0     0          0         0       40       1    0    0    0     0       0          0\n", 1030, 240},
		{"loopback only counts nothing", header +
			"    lo: 5000      50    0    0    0     0          0         0     5000      50    0    0    0     0       0          0\n", 0, 0},
	} {
		rx, tx, err := ParseNetDev([]byte(tc.in))
		if err != nil || rx != tc.rx || tx != tc.tx {
			t.Errorf("%s: rx %d tx %d, %v; want %d %d", tc.name, rx, tx, err, tc.rx, tc.tx)
		}
	}
	if _, _, err := ParseNetDev([]byte(header + "eth0: 1 2 3\n")); err == nil {
		t.Error("a short line gave no error")
	}
}

// stat is a /proc/<pid>/stat line with the fields the parser reads.
func stat(pid int, comm string, ppid, pgid, utime, stime, cutime, cstime, rss int) string {
	return fmt.Sprintf("%d (%s) S %d %d %d 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0 100 1048576 %d 0 0 0\n",
		pid, comm, ppid, pgid, pgid, utime, stime, cutime, cstime, rss)
}

func TestParseProcStat(t *testing.T) {
	p, err := ParseProcStat([]byte(stat(42, "python (train) x", 7, 40, 300, 100, 50, 50, 2560)))
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 42 || p.PPID != 7 || p.PGID != 40 || p.CPUTicks != 500 || p.RSSPages != 2560 {
		t.Errorf("parsed %+v", p)
	}
	for _, bad := range []string{"", "42 no name", "42 (sh) S 1 2"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat(%q) gave no error", bad)
		}
	}
}

// A job's tree is its process group and what descends from it, even a
// child that made a session of its own; other groups are not the job's.
func TestTree(t *testing.T) {
	procs := []Proc{
		{PID: 1, PPID: 0, PGID: 1},
		{PID: 10, PPID: 1, PGID: 10},    // the agent
		{PID: 100, PPID: 10, PGID: 100}, // the job's init, group leader
		{PID: 101, PPID: 100, PGID: 100},
		{PID: 102, PPID: 101, PGID: 102}, // left the group (setsid)
		{PID: 103, PPID: 102, PGID: 102},
		{PID: 200, PPID: 10, PGID: 200}, // another job
	}
	var got []int
	for _, p := range Tree(procs, 100) {
		got = append(got, p.PID)
	}
	if fmt.Sprint(got) != "[100 101 102 103]" {
		t.Errorf("tree = %v, want 100 101 102 103", got)
	}
	if len(Tree(procs, 0)) != 0 {
		t.Error("a job without a process group has processes")
	}
}

func TestParseGPUs(t *testing.T) {
	out := "0, 87, 30000, 40960\n1, [N/A], 100, 40960\n\n2, [Not Supported], [N/A], [N/A]\n"
	gpus, err := ParseGPUs([]byte(out))
	if err != nil || len(gpus) != 3 {
		t.Fatalf("%+v %v", gpus, err)
	}
	if gpus[0].Utilization == nil || *gpus[0].Utilization != 0.87 || gpus[0].MemoryUsed != 30000<<20 || gpus[0].MemoryTotal != 40960<<20 {
		t.Errorf("gpu 0: %+v", gpus[0])
	}
	if gpus[1].Utilization != nil || gpus[1].MemoryUsed != 100<<20 {
		t.Errorf("gpu 1 ([N/A] utilization): %+v", gpus[1])
	}
	if gpus[2].Index != 2 || gpus[2].Utilization != nil || gpus[2].MemoryTotal != 0 {
		t.Errorf("gpu 2 (nothing supported): %+v", gpus[2])
	}
	for _, bad := range []string{"0, 1, 2\n", "x, 1, 2, 3\n", "0, lots, 2, 3\n"} {
		if _, err := ParseGPUs([]byte(bad)); err == nil {
			t.Errorf("ParseGPUs(%q) gave no error", bad)
		}
	}
}

// A Sampler over a proc folder of sample files: the node's CPU between
// two samples, memory, network, and a job's CPU, memory and GPU from its
// process tree and the devices it was given.
func TestSampler(t *testing.T) {
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
	write("stat", "cpu  0 0 0 1000 0 0 0 0\ncpu0 0\ncpu1 0\n")
	write("meminfo", "MemTotal: 8000 kB\nMemAvailable: 6000 kB\n")
	write("net/dev", "h\nh\n  eth0: 10 0 0 0 0 0 0 0 20 0 0 0 0 0 0 0\n")
	write("100/stat", stat(100, "init", 10, 100, 0, 0, 0, 0, 100))
	write("101/stat", stat(101, "python", 100, 100, 0, 0, 0, 0, 900))
	s := &Sampler{Proc: proc, Dir: proc, PageSize: 4096,
		QueryGPUs: func(context.Context) ([]byte, error) { return []byte("0, 20, 1, 2\n1, 60, 3, 4\n"), nil }}
	t0 := time.Unix(1000, 0)
	job := Job{UID: "u1", Attempt: 1, PGID: 100, Started: t0.Add(-10 * time.Second), GPUs: []int{1}}
	u, err := s.Sample(context.Background(), t0, []Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU != 0 || u.CPUs != 2 || u.MemoryUsed != 2000*1024 || u.MemoryTotal != 8000*1024 || u.NetworkReceived != 10 || u.NetworkSent != 20 || u.DiskTotal <= 0 {
		t.Errorf("first sample: %+v", u)
	}
	if len(u.Jobs) != 1 || u.Jobs[0].MemoryUsed != 1000*4096 || u.Jobs[0].CPU != 0 {
		t.Fatalf("first job sample: %+v", u.Jobs)
	}
	if len(u.Jobs[0].GPUs) != 1 || *u.Jobs[0].GPUs[0].Utilization != 0.6 {
		t.Errorf("the job's GPUs: %+v, want device 1 at 60%%", u.Jobs[0].GPUs)
	}
	// 15 s later: the node was busy 1500 of 3000 ticks; the job's python
	// used 15 CPU seconds of the node's 30.
	write("stat", "cpu  1000 0 500 2500 0 0 0 0\ncpu0 0\ncpu1 0\n")
	write("101/stat", stat(101, "python", 100, 100, 1000, 500, 0, 0, 900))
	u, err = s.Sample(context.Background(), t0.Add(15*time.Second), []Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU != 0.5 || u.Interval != 15*time.Second {
		t.Errorf("node CPU %v over %v, want 0.5 over 15s", u.CPU, u.Interval)
	}
	if u.Jobs[0].CPU != 0.5 || u.Jobs[0].CPUSeconds != 15 {
		t.Errorf("job CPU %v (%v s), want 0.5 (15 s)", u.Jobs[0].CPU, u.Jobs[0].CPUSeconds)
	}
}
