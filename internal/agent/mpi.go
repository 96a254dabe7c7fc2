package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// An MPI job is launched as Azure ML launches it (see package distrib):
// node 0 runs mpirun over every node; each other node runs a launcher
// (cumulus-mpi-launchd) as its job process, which runs the one MPI daemon
// that node 0's mpirun asks for through the rsh helper (cumulus-mpi-rsh),
// serves it and what it starts to their end, and then holds the node for
// the job until it is told to stop (node 0's mpirun has ended). The
// agent reports which part a node plays (JobState.MPIRole): the server
// ends the job with mpirun, and takes a launcher that ended on its own
// while mpirun ran for a node that mpirun lost.
// Both helpers are this executable under another name, linked into the
// job's folder so that the job's user can run them and, in a container,
// they are where the folder is mounted.

// Names the helpers run under (package init dispatches on them).
const (
	mpiRshName     = "cumulus-mpi-rsh"
	mpiLaunchdName = "cumulus-mpi-launchd"
)

// Environment of the helpers.
const (
	envMPILaunchers = "CUMULUS_MPI_LAUNCHERS" // every node's launcher address, by rank
	envMPIToken     = "CUMULUS_MPI_TOKEN"     // the attempt's launch secret
	envMPIListen    = "CUMULUS_MPI_LISTEN"    // this node's launcher address
	envMPILaunch    = "MPI_LAUNCHER"          // "none": the per-process mode instead
)

// mpiLaunch returns the one process of this node in an MPI launch: mpirun
// on node 0, the launcher elsewhere. ok is false when the job is not an MPI
// job, asks for the per-process mode, runs in a container image, or finds
// no MPI launcher (the job then starts each rank itself with the OMPI_*
// and PMI_* variables, which only PMI-aware programs honour; the reason
// goes to the job's log).
func (j *job) mpiLaunch(env []string, logf io.Writer) (p distrib.Process, ok bool, err error) {
	d := j.asg.Distribution
	if d == nil || d.Type != distrib.MPI || j.image != "" {
		return p, false, nil
	}
	if strings.EqualFold(j.asg.Env[envMPILaunch], "none") {
		return p, false, nil
	}
	if d.LaunchToken == "" {
		fmt.Fprintln(logf, "cumulus: this server gives no MPI launch secret; each rank is started as a process of its own")
		return p, false, nil
	}
	nodes := max(len(j.asg.NodeIPs), 1)
	rank := j.asg.InstanceIndex
	launcher, impl := findMPI(env)
	if rank == 0 && launcher == "" {
		fmt.Fprintln(logf, "cumulus: no mpirun or mpiexec on PATH; each rank is started as a process of its own (only PMI-aware programs see each other)")
		return p, false, nil
	}
	helpers := filepath.Join(j.dir, ".cumulus")
	if err := linkHelpers(helpers); err != nil {
		return p, false, fmt.Errorf("mpi: %w", err)
	}
	rsh := filepath.Join(helpers, mpiHelpersBin, mpiRshName)
	p.Rank = rank * max(d.ProcessesPerNode, 1)
	p.Env = append(distrib.MPIEnv(d, rank, j.asg.NodeIPs, rsh),
		envMPILaunchers+"="+distrib.LauncherAddrs(d, j.asg.NodeIPs), envMPIToken+"="+d.LaunchToken,
		"PATH="+filepath.Dir(rsh)+string(filepath.ListSeparator)+envValue(env, "PATH"))
	if rank == 0 {
		if impl == "" {
			impl = distrib.OpenMPI
		}
		hostfile := filepath.Join(j.dir, "hostfile")
		if err := os.WriteFile(hostfile, []byte(distrib.MPIHostfile(impl, nodes, d.ProcessesPerNode)), 0o644); err != nil {
			return p, false, fmt.Errorf("write the MPI hostfile: %w", err)
		}
		p.Env = append(p.Env, "CUMULUS_HOSTFILE="+hostfile)
		p.Argv = distrib.MPICommand(impl, launcher, hostfile, rsh, nodes*max(d.ProcessesPerNode, 1), j.asg.Command)
		j.setState(func(s *agentapi.JobState) { s.MPIRole = agentapi.MPIRoleMpirun })
		return p, true, nil
	}
	port := distrib.LauncherPort(d, rank)
	if err := j.checkPorts([]int{port}); err != nil {
		return p, false, err
	}
	listen := ":" + fmt.Sprint(port)
	if rank < len(j.asg.NodeIPs) && j.asg.NodeIPs[rank] != "" {
		listen = strings.Split(distrib.LauncherAddrs(d, j.asg.NodeIPs), ",")[rank]
	}
	p.Env = append(p.Env, envMPIListen+"="+listen)
	p.Argv = []string{filepath.Join(helpers, mpiLaunchdName)}
	j.setState(func(s *agentapi.JobState) { s.MPIRole = agentapi.MPIRoleLauncher })
	return p, true, nil
}

// findMPI finds mpirun (or mpiexec) on the job's PATH and tells which
// implementation it is.
func findMPI(env []string) (path, impl string) {
	pathVar := envValue(env, "PATH")
	for _, name := range []string{"mpirun", "mpiexec"} {
		for _, dir := range filepath.SplitList(pathVar) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cmd := exec.CommandContext(ctx, p, "--version")
				cmd.Env = env
				out, _ := cmd.CombinedOutput()
				cancel()
				return p, distrib.MPIImpl(string(out))
			}
		}
	}
	return "", ""
}

// linkHelpers puts this executable into dir (a hard link, else a copy)
// with the helpers' names beside it.
func linkHelpers(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "cumulus")
	if err := os.Link(self, bin); err != nil && !errors.Is(err, os.ErrExist) {
		if err := copyFile(self, bin); err != nil {
			return fmt.Errorf("copy the MPI helpers: %w", err)
		}
	}
	for _, name := range []string{mpiRshName, mpiLaunchdName} {
		if err := os.Symlink("cumulus", filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	// The rsh helper alone in a folder of its own, for PATH (see
	// distrib.MPIEnv).
	if err := os.MkdirAll(filepath.Join(dir, mpiHelpersBin), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("../cumulus", filepath.Join(dir, mpiHelpersBin, mpiRshName)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// mpiHelpersBin is the folder, beside the helpers, that holds only the
// rsh helper: it goes first on the PATH of an MPI launch's processes.
const mpiHelpersBin = "bin"

// envValue is the value of key in env (the last one set), "" when unset.
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v = val
		}
	}
	return v
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
