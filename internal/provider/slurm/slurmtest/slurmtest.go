// Package slurmtest starts a private Slurm for tests: munged, slurmctld and
// slurmd of Debian's slurm-wlm, as root, on loopback with random ports, in
// a temporary folder of their own, with one machine ("localhost") whose
// GPUs are GRES on device files (character devices with the numbers of
// the kernel's harmless mem devices: there are no GPUs). Each test starts
// its own and stops it, cancelling its jobs first. Without root or Slurm
// a test skips and says why, except with CI set: then it fails.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"
)

// Partitions of the test cluster, all on its one machine. A job of a
// partition of higher priority tier preempts jobs of Spot (Slurm cancels
// them: Cumulus submits node jobs with --no-requeue).
const (
	Batch  = "batch"  // the default; priority tier 10, never preempted
	Spot   = "spot"   // priority tier 1, preempted (PreemptMode=REQUEUE; no GraceTime: SIGTERM at once, SIGKILL after KillWait, 30 s)
	Urgent = "urgent" // priority tier 100, never preempted
)

// Machine is the one machine's size, and how its Slurm is set up.
type Machine struct {
	CPUs     int  // default 64
	MemoryMB int  // default 1000000 (Slurm lets slurmd claim more than there is)
	GPUs     int  // default 4
	NoGPUs   bool // no GPUs (GPUs is then ignored)

	// Throughput sets Slurm up as its high-throughput guide says: the
	// builtin scheduler with defer (no attempt to schedule each job as it
	// is submitted) and no delay for batch jobs (batch_sched_delay=0: with
	// its default of 3 s, deferred jobs start in waves every 3 s), or the
	// SchedulerParameters given; no accounting and no job accounting
	// gatherer, little logging, finished jobs purged after 2 s. A job of
	// one CPU then takes one CPU of the machine (CR_Core).
	Throughput          bool
	SchedulerParameters string // with Throughput; default "defer,batch_sched_delay=0"

	// Start makes the command that runs a daemon (e.g. one that first
	// moves itself into a cgroup of the caller's); default exec.Command.
	Start func(name string, args ...string) *exec.Cmd
}

// Cluster is a running private Slurm.
type Cluster struct {
	Dir   string // its folder: configuration, state, logs, device files
	Conf  string // its slurm.conf: SLURM_CONF for commands
	t     testing.TB
	start func(name string, args ...string) *exec.Cmd
	procs []*exec.Cmd
}

// Env is the variable that points Slurm's commands at this cluster.
func (c *Cluster) Env() string { return "SLURM_CONF=" + c.Conf }

// Start starts a private Slurm with one machine of size m and stops it
// when the test ends (before the test's temporary folders made earlier are
// removed: make those the node jobs write to first).
func Start(t testing.TB, m Machine) *Cluster {
	t.Helper()
	if why := missing(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot start a test Slurm: %s", why)
		}
		t.Skipf("cannot start a test Slurm: %s", why)
	}
	if m.CPUs == 0 {
		m.CPUs = 64
	}
	if m.MemoryMB == 0 {
		m.MemoryMB = 1000000
	}
	switch {
	case m.NoGPUs:
		m.GPUs = 0
	case m.GPUs == 0:
		m.GPUs = 4
	}
	if m.SchedulerParameters == "" {
		m.SchedulerParameters = "defer,batch_sched_delay=0"
	}
	if m.Start == nil {
		m.Start = exec.Command
	}
	dir, err := os.MkdirTemp("", "cumulus-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), t: t, start: m.Start}
	t.Cleanup(c.stop)
	for _, sub := range []string{"run", "state", "spool", "log", "dev", "jobs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { // jobs (as root) read the agent's paths below it
		t.Fatal(err)
	}
	key := make([]byte, 128)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range m.GPUs {
		// The mem driver's minors 3 (null), 5 (zero), 7 (full), 9 (urandom)…
		dev := filepath.Join(dir, "dev", fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(mkdev(1, uint32(3+2*i)))); err != nil {
			t.Fatalf("make a stand-in GPU device file: %v", err)
		}
	}
	ports, err := freeport.Pick(2)
	if err != nil {
		t.Fatal(err)
	}
	ctld, slurmd := ports[0], ports[1]
	if err := os.WriteFile(c.Conf, []byte(conf(dir, ctld, slurmd, m)), 0o644); err != nil {
		t.Fatal(err)
	}
	gres := ""
	if m.GPUs > 0 {
		gres = fmt.Sprintf("NodeName=localhost Name=gpu File=%s/dev/nvidia[0-%d]\n", dir, m.GPUs-1)
	}
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		t.Fatal(err)
	}
	c.daemon("munged", "-F", "-f", "--socket="+filepath.Join(dir, "run", "munge.sock"), "--key-file="+filepath.Join(dir, "munge.key"),
		"--pid-file="+filepath.Join(dir, "run", "munged.pid"), "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(dir, "run", "munged.seed"))
	c.waitFor("munged", func() bool {
		_, err := os.Stat(filepath.Join(dir, "run", "munge.sock"))
		return err == nil
	})
	c.daemon("slurmctld", "-D", "-i", "-f", c.Conf)
	c.daemon("slurmd", "-D", "-N", "localhost", "-f", c.Conf)
	c.waitFor("the machine to be idle in sinfo", func() bool {
		out, err := c.Command("sinfo", "--noheader", "--format=%T", "--partition="+Batch)
		return err == nil && strings.TrimSpace(out) == "idle"
	})
	return c
}

// missing says what this machine lacks to run a test Slurm; "" for
// nothing.
func missing() string {
	if os.Geteuid() != 0 {
		return "the test Slurm runs as root (scripts/test-setup.sh, CI)"
	}
	for _, b := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo", "scontrol"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " is not installed (apt-get install slurm-wlm munge; scripts/test-setup.sh does)"
		}
	}
	return ""
}

func conf(dir string, ctld, slurmd int, m Machine) string {
	gres, gresTypes := "", ""
	if m.GPUs > 0 {
		gres, gresTypes = fmt.Sprintf(" Gres=gpu:%d", m.GPUs), "GresTypes=gpu\n"
	}
	sched := fmt.Sprintf(`SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectTypeParameters=CR_Core_Memory
MinJobAge=60
KillWait=30
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=%[1]s Nodes=localhost Default=YES MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
PartitionName=%[2]s Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=%[3]s Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=100 PreemptMode=OFF`, Batch, Spot, Urgent)
	if m.Throughput {
		sched = fmt.Sprintf(`SlurmctldDebug=error
SlurmdDebug=error
SchedulerType=sched/builtin
SchedulerParameters=%s
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=2
MaxJobCount=100000
PartitionName=%s Nodes=localhost Default=YES MaxTime=INFINITE State=UP`, m.SchedulerParameters, Batch)
	}
	return fmt.Sprintf(`ClusterName=cumulus-test
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
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
SlurmdParameters=config_overrides
%[8]sNodeName=localhost CPUs=%[4]d RealMemory=%[5]d%[6]s State=UNKNOWN
%[7]s
`, dir, ctld, slurmd, m.CPUs, m.MemoryMB, gres, sched, gresTypes)
}

// daemon starts one of the cluster's daemons in the foreground, its
// output in the log folder.
func (c *Cluster) daemon(name string, args ...string) {
	c.t.Helper()
	log, err := os.Create(filepath.Join(c.Dir, "log", name+".out"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := c.start(name, args...)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, c.Env())
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, stopped by stop; and stopped with the test's
	// process if that dies first (killed, or a test binary's pipe closed).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.procs = append(c.procs, cmd)
}

func (c *Cluster) waitFor(what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("test Slurm: no %s within 60 s:\n%s", what, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Command runs one of Slurm's commands against this cluster and returns
// its output; the error holds what it wrote to stderr.
func (c *Cluster) Command(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Must runs a command and fails the test when it fails.
func (c *Cluster) Must(name string, args ...string) string {
	c.t.Helper()
	out, err := c.Command(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// Submit submits a batch job of script with sbatch's args (a job from
// outside Cumulus) and returns its id.
func (c *Cluster) Submit(script string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command("sbatch", append([]string{"--parsable", "--output=" + filepath.Join(c.Dir, "log", "job-%j.out")}, args...)...)
	cmd.Env = append(os.Environ(), c.Env())
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("sbatch %v: %v: %s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

// State is a job's state as squeue shows it ("" once it left the queue).
func (c *Cluster) State(id string) string {
	out, _ := c.Command("squeue", "--noheader", "--states=all", "--format=%T", "--jobs="+id)
	return strings.TrimSpace(out)
}

// Jobs lists the cluster's jobs as "id name state partition", live or
// recently ended.
func (c *Cluster) Jobs() []string {
	out, _ := c.Command("squeue", "--noheader", "--states=all", "--format=%i %j %T %P")
	var jobs []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			jobs = append(jobs, l)
		}
	}
	return jobs
}

// Live lists the ids of the jobs of a name (a node id) that are pending or
// running.
func (c *Cluster) Live(name string) []string {
	out, _ := c.Command("squeue", "--noheader", "--states=PENDING,CONFIGURING,RUNNING", "--format=%i", "--name="+name)
	return strings.Fields(out)
}

var idxRe = regexp.MustCompile(`IDX:([0-9,\-]+)`)

// GPUIndexes are the GRES GPU indexes Slurm gave job id (scontrol show
// job -d); nil when it gave none.
func (c *Cluster) GPUIndexes(id string) []int {
	c.t.Helper()
	out := c.Must("scontrol", "show", "job", "-d", id)
	m := idxRe.FindStringSubmatch(out)
	if m == nil {
		return nil
	}
	var idx []int
	for _, part := range strings.Split(m[1], ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		for i := a; i <= b; i++ {
			idx = append(idx, i)
		}
	}
	return idx
}

// Pids are the daemons' process ids.
func (c *Cluster) Pids() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.Process.Pid)
	}
	return pids
}

// Logs are the tails of the daemons' logs, for a failing test.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range []string{"slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out", "munged.log"} {
		out, _ := os.ReadFile(filepath.Join(c.Dir, "log", name))
		s := string(out)
		if len(s) > 3000 {
			s = s[len(s)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, s)
	}
	return b.String()
}

// stop cancels every job, waits for their processes to be reaped, then
// stops the daemons and removes the folder.
func (c *Cluster) stop() {
	if len(c.procs) > 0 {
		_, _ = c.Command("scancel", "--full", "--user=root")
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			out, err := c.Command("squeue", "--noheader", "--format=%i")
			if err != nil || strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if c.t.Failed() {
		c.t.Logf("test Slurm logs:\n%s", c.Logs())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
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
	os.RemoveAll(c.Dir)
}

// mkdev is Linux's device number of major:minor.
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0xfff)<<8 | uint64(minor&0xff) | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}
