package scale

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/provider/slurm/slurmtest"
)

// slurm is a private Slurm (Debian's slurm-wlm: munged, slurmctld and one
// slurmd) on loopback, tuned as Slurm's high-throughput guide says (see
// slurmtest.Machine's Throughput; VS_SLURM_SCHED replaces its
// SchedulerParameters). Its one machine has slots CPUs (more than this
// machine has: slurmd takes the configured figures) and no GPUs, and a job
// of one CPU takes one slot.
type slurm struct{ *slurmtest.Cluster }

// startSlurm starts a private Slurm whose daemons run in the groups ctl
// (slurmctld), auth (munged) and node (slurmd, and so its slurmstepds and
// jobs), and stops it when the benchmark ends.
func startSlurm(b *testing.B, slots int, ctl, auth, node *cpuGroup) *slurm {
	b.Helper()
	group := map[string]*cpuGroup{"slurmctld": ctl, "munged": auth, "slurmd": node}
	return &slurm{slurmtest.Start(b, slurmtest.Machine{
		CPUs:                slots,
		NoGPUs:              true,
		Throughput:          true,
		SchedulerParameters: os.Getenv("VS_SLURM_SCHED"),
		Start: func(name string, args ...string) *exec.Cmd {
			return group[name].command(name, args...)
		},
	})}
}

var sdiagRe = regexp.MustCompile(`Jobs (completed|failed|canceled):\s+(\d+)`)

// ended is how many jobs have ended (completed, failed or canceled) since
// slurmctld started, from its statistics (one cheap RPC).
func (s *slurm) ended() (completed, other int, err error) {
	out, err := s.Command("sdiag")
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

// sbatch submits one job of `true` with sbatch, from the submit folder
// (where its output file goes, as by default).
func (s *slurm) sbatch(tag string, i int) (time.Duration, error) {
	cmd := exec.Command("sbatch", "--job-name", fmt.Sprintf("%s-%d", tag, i), "--wrap", "true")
	cmd.Env = append(os.Environ(), s.Env())
	cmd.Dir = filepath.Join(s.Dir, "jobs")
	cmd.Stdout = devNull
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("sbatch: %w: %s", err, stderr.String())
	}
	return rusageCPU(cmd.ProcessState), nil
}
