package jobinit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

func TestIdentityFiles(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/bash\n# a comment\nalice:x:1000:1000::/home/alice:/bin/sh")
	group := []byte("root:x:0:\nstaff:x:50:\n")
	pw, gr, name := jobinit.IdentityFiles(passwd, group, jobinit.User{UID: 2000420000, GID: 2000420000, Home: "/w/jobs/j"})
	if name != "cumulus-job" {
		t.Errorf("name %q, want cumulus-job", name)
	}
	if want := string(passwd) + "\ncumulus-job:x:2000420000:2000420000:Cumulus job:/w/jobs/j:/bin/sh\n"; string(pw) != want {
		t.Errorf("passwd:\n%s\nwant\n%s", pw, want)
	}
	if want := string(group) + "cumulus-job:x:2000420000:\n"; string(gr) != want {
		t.Errorf("group:\n%s\nwant\n%s", gr, want)
	}
	// A uid or gid the machine names keeps its name; a taken name gets the id.
	pw, gr, name = jobinit.IdentityFiles(passwd, group, jobinit.User{UID: 1000, GID: 50, Home: "/h"})
	if name != "alice" || string(pw) != string(passwd) || string(gr) != string(group) {
		t.Errorf("a known uid and gid: %q\n%s\n%s", name, pw, gr)
	}
	taken := append(passwd, "\ncumulus-job:x:7:7::/:/bin/sh\n"...)
	if _, _, name = jobinit.IdentityFiles(taken, group, jobinit.User{UID: 9, GID: 9}); name != "cumulus-job-9" {
		t.Errorf("name beside a taken cumulus-job: %q", name)
	}
}

// A job init starts before the control plane's packages are initialized:
// none of this module's other packages but procs (a look at the command
// line), and none of the costly ones
// (Prometheus' client, SQLite, the SSH server, YAML…), runs its package
// init first (two of these per job each paid for the whole program's
// before). Go initializes, of the packages whose imports are done, the
// one whose path sorts first: what runs before this package is what its
// own imports (os, strconv, syscall, time…) wait for, cheap packages of
// the standard library and a few small ones. The init here has no spec
// and fails at once, which is enough to see what ran before it.
func TestJobInitStartsAlone(t *testing.T) {
	dir := t.TempDir()
	bin, built, err := testbin.Cumulus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if built {
		t.Logf("built %s", bin)
	}
	cmd := &exec.Cmd{Path: bin, Args: []string{jobinit.Name}, Env: append(os.Environ(), "GODEBUG=inittrace=1")}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 127 || !strings.Contains(string(out), "no spec on descriptor") {
		t.Fatalf("a job init without a spec: exit %d (%v), output:\n%s", code, err, out)
	}
	var before []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			before = append(before, f[1])
		}
	}
	t.Logf("initialized before the job init: %v", before)
	costly := map[string]bool{"modernc.org/libc": true, "modernc.org/sqlite": true, "modernc.org/sqlite/lib": true,
		"golang.org/x/crypto/ssh": true, "net/http": true, "html/template": true}
	// procs decides, from the command line alone, how many processors a
	// CLI command runs on; for a job init it compares one word and returns.
	const procs = "github.com/cumulus-ml/cumulus/internal/procs"
	for _, p := range before {
		if costly[p] || strings.HasPrefix(p, "github.com/cumulus-ml/") && p != procs || strings.HasPrefix(p, "github.com/prometheus/") ||
			strings.HasPrefix(p, "gopkg.in/") || strings.HasPrefix(p, "github.com/spf13/") {
			t.Errorf("package %s was initialized before the job init ran", p)
		}
	}
}

// BenchmarkJobInit starts the program's job init as the agent does for an
// isolated job of one command (`true`, as its job user, with KillAll) and
// reports the CPU each start costs: the init's and its command's, from
// their rusage. It needs root (the job user, the mounts).
func BenchmarkJobInit(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the job init becomes a job user and mounts")
	}
	dir := b.TempDir()
	bin, _, err := testbin.Cumulus(dir)
	if err != nil {
		b.Fatal(err)
	}
	mask := filepath.Join(dir, "work")
	job, tmp := filepath.Join(mask, "jobs", "j"), filepath.Join(dir, "tmp")
	for _, d := range []string{job, tmp} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			b.Fatal(err)
		}
	}
	const uid = 2000999005
	spec := jobinit.Spec{User: &jobinit.User{UID: uid, GID: uid, Home: job}, Mask: mask, Tmp: tmp, ShmSize: 64 << 20,
		KillAll: true, Dir: job, Path: "/bin/sh", Args: []string{"-c", "true"}}
	var cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		f, err := os.CreateTemp(dir, "spec")
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(f.Name())
		if _, err := f.Write(spec.Encode()); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			b.Fatal(err)
		}
		cmd := &exec.Cmd{Path: bin, Args: []string{jobinit.Name}, Dir: job, ExtraFiles: []*os.File{f},
			SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}}
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			b.Fatalf("job init: %v: %s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/job")
}

// A job init runs with GOMAXPROCS=1 and gives its command the command's
// own GOMAXPROCS back: a value the job set, an empty one, or none at all;
// nothing the init alone needs reaches the command.
func TestCommandGetsItsOwnGOMAXPROCS(t *testing.T) {
	for _, own := range [][]string{{"A=1"}, {"A=1", "GOMAXPROCS=6"}, {"GOMAXPROCS=", "A=1"}, {"A=1", jobinit.EnvGoMaxProcs + "=9"}} {
		initEnv := jobinit.InitEnv(own)
		if got := lookup(initEnv, "GOMAXPROCS"); got != "1" {
			t.Errorf("init's environment %q: GOMAXPROCS %q, want 1", initEnv, got)
		}
		cmd := jobinit.CommandEnv(append(initEnv, jobinit.EnvContainer+"=c"))
		want := slices.DeleteFunc(slices.Clone(own), func(kv string) bool { return strings.HasPrefix(kv, jobinit.EnvGoMaxProcs+"=") })
		slices.Sort(cmd)
		slices.Sort(want)
		if !slices.Equal(cmd, want) {
			t.Errorf("command's environment = %q, want %q", cmd, want)
		}
	}
}

func lookup(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
