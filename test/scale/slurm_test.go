package scale

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slurm is a private Slurm (Debian's slurm-wlm: munged, slurmctld and one
// slurmd) on loopback with random ports, in a folder of its own, tuned as
// Slurm's high-throughput guide says: the builtin scheduler with defer (no
// attempt to schedule each job as it is submitted) and no delay for batch
// jobs (batch_sched_delay=0: with its default of 3 s, deferred jobs start
// in waves every 3 s, 64 slots then give 20 jobs/s here; VS_SLURM_SCHED
// replaces these SchedulerParameters), no accounting and no job
// accounting gatherer, little logging, finished jobs purged after 2 s.
// Its one machine has slots CPUs (more than this machine has: slurmd
// takes the configured figures), and a job of one CPU takes one slot. Each
// daemon runs in the accounting group the caller names.
type slurm struct {
	dir, conf string
	procs     []*exec.Cmd
}

// slurmMissing says what this machine lacks to run a private Slurm; "" for
// nothing.
func slurmMissing() string {
	if os.Geteuid() != 0 {
		return "a private Slurm runs as root"
	}
	for _, b := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "sdiag", "scancel"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " is not installed (apt-get install slurm-wlm munge)"
		}
	}
	return ""
}

// startSlurm starts a private Slurm whose daemons run in the groups ctl
// (slurmctld), auth (munged) and node (slurmd, and so its slurmstepds and
// jobs), and stops it when the benchmark ends.
func startSlurm(b *testing.B, slots int, ctl, auth, node *cpuGroup) *slurm {
	b.Helper()
	if why := slurmMissing(); why != "" {
		if os.Getenv("CI") != "" {
			b.Fatalf("cannot start Slurm: %s", why)
		}
		b.Skipf("cannot start Slurm: %s", why)
	}
	dir, err := os.MkdirTemp("", "cumulus-vs-slurm-")
	if err != nil {
		b.Fatal(err)
	}
	s := &slurm{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	b.Cleanup(s.stop)
	for _, sub := range []string{"run", "state", "spool", "log", "jobs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	key := make([]byte, 128)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o600); err != nil {
		b.Fatal(err)
	}
	sched := "defer,batch_sched_delay=0"
	if v := os.Getenv("VS_SLURM_SCHED"); v != "" {
		sched = v
	}
	conf := fmt.Sprintf(`ClusterName=vs
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[1]s/run/munge.sock
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/run/slurmctld.pid
SlurmdPidFile=%[1]s/run/slurmd.pid
SlurmctldLogFile=%[1]s/log/slurmctld.log
SlurmdLogFile=%[1]s/log/slurmd.log
SlurmctldDebug=error
SlurmdDebug=error
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SchedulerParameters=%[5]s
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=2
MaxJobCount=100000
NodeName=localhost CPUs=%[4]d RealMemory=100000 State=UNKNOWN
PartitionName=batch Nodes=localhost Default=YES MaxTime=INFINITE State=UP
`, dir, freePort(b), freePort(b), slots, sched)
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	s.daemon(b, auth, "munged", "-F", "-f", "--socket="+filepath.Join(dir, "run", "munge.sock"),
		"--key-file="+filepath.Join(dir, "munge.key"), "--pid-file="+filepath.Join(dir, "run", "munged.pid"),
		"--log-file="+filepath.Join(dir, "log", "munged.log"), "--seed-file="+filepath.Join(dir, "run", "munged.seed"))
	waitFor(b, "munged", time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(dir, "run", "munge.sock"))
		return err == nil
	})
	s.daemon(b, ctl, "slurmctld", "-D", "-i", "-f", s.conf)
	s.daemon(b, node, "slurmd", "-D", "-N", "localhost", "-f", s.conf)
	waitFor(b, "the Slurm node idle", time.Minute, func() bool {
		out, err := s.command("sinfo", "--noheader", "--format=%T")
		return err == nil && strings.TrimSpace(out) == "idle"
	})
	return s
}

// env is what points Slurm's commands at this Slurm.
func (s *slurm) env() []string { return append(os.Environ(), "SLURM_CONF="+s.conf) }

// daemon starts one of Slurm's daemons in the foreground in group g.
func (s *slurm) daemon(b *testing.B, g *cpuGroup, name string, args ...string) {
	b.Helper()
	log, err := os.Create(filepath.Join(s.dir, "log", name+".out"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd := g.command(name, args...)
	cmd.Env = append(cmd.Env, "SLURM_CONF="+s.conf)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	s.procs = append(s.procs, cmd)
}

// command runs one of Slurm's commands and returns its output.
func (s *slurm) command(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

var sdiagRe = regexp.MustCompile(`Jobs (completed|failed|canceled):\s+(\d+)`)

// ended is how many jobs have ended (completed, failed or canceled) since
// slurmctld started, from its statistics (one cheap RPC).
func (s *slurm) ended() (completed, other int, err error) {
	out, err := s.command("sdiag")
	if err != nil {
		return 0, 0, err
	}
	for _, m := range sdiagRe.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		if m[1] == "completed" {
			completed += n
		} else {
			other += n
		}
	}
	return completed, other, nil
}

// pids are the daemons' process ids.
func (s *slurm) pids() []int {
	var pids []int
	for _, p := range s.procs {
		pids = append(pids, p.Process.Pid)
	}
	return pids
}

// logs are the tails of the daemons' logs.
func (s *slurm) logs() string {
	var b strings.Builder
	for _, name := range []string{"slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out", "munged.log"} {
		out, _ := os.ReadFile(filepath.Join(s.dir, "log", name))
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, out)
	}
	return b.String()
}

// stop cancels what is left, stops the daemons and removes the folder.
func (s *slurm) stop() {
	if len(s.procs) > 1 {
		_, _ = s.command("scancel", "--full", "--user=root")
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

func freePort(b *testing.B) int {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
