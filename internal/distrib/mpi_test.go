package distrib

import (
	"slices"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

func TestHostNamesRoundTrip(t *testing.T) {
	for r := range 5 {
		got, ok := NodeOfHost(HostName(r))
		if !ok || got != r {
			t.Errorf("NodeOfHost(HostName(%d)) = %d, %v", r, got, ok)
		}
	}
	for _, bad := range []string{"", "cumulus-node-0", "cumulus-node--1", "cumulus-node-x", "10.0.0.2", "node-1"} {
		if _, ok := NodeOfHost(bad); ok {
			t.Errorf("NodeOfHost(%q) accepted a name that is no node of the job", bad)
		}
	}
}

func TestMPIHostfileFormats(t *testing.T) {
	if got, want := MPIHostfile(OpenMPI, 2, 4), "localhost slots=4\ncumulus-node-1 slots=4\n"; got != want {
		t.Errorf("Open MPI hostfile = %q, want %q", got, want)
	}
	if got, want := MPIHostfile(Hydra, 3, 1), "localhost:1\ncumulus-node-1:1\ncumulus-node-2:1\n"; got != want {
		t.Errorf("Hydra hostfile = %q, want %q", got, want)
	}
}

func TestMPIImplFromVersionOutput(t *testing.T) {
	for out, want := range map[string]string{
		"mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/": OpenMPI,
		"HYDRA build details:\n    Version:                                 4.0.2":          Hydra,
		"Intel(R) MPI Library for Linux* OS, Version 2021.6":                                Hydra,
		"bash: mpirun: command not found":                                                   "",
	} {
		if got := MPIImpl(out); got != want {
			t.Errorf("MPIImpl(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestMPICommandRunsTheJobOnEverySlot(t *testing.T) {
	got := MPICommand(OpenMPI, "/usr/bin/mpirun", "/j/hostfile", "/j/rsh", 6, "python train.py")
	want := []string{"/usr/bin/mpirun", "--hostfile", "/j/hostfile", "-np", "6", "/bin/sh", "-c", "python train.py"}
	if !slices.Equal(got, want) {
		t.Errorf("Open MPI command = %q, want %q", got, want)
	}
	if got := MPICommand(Hydra, "mpiexec", "/j/hostfile", "/j/rsh", 2, "x"); !slices.Contains(got, "-launcher-exec") || !slices.Contains(got, "/j/rsh") {
		t.Errorf("Hydra command %q does not launch through the rsh helper", got)
	}
}

func TestMPIEnvLoopbackOnlyForLocalNodes(t *testing.T) {
	d := &agentapi.Distribution{Type: "Mpi", ProcessesPerNode: 2, MasterPort: 29500}
	local := strings.Join(MPIEnv(d, 1, []string{"127.0.0.1", "127.0.0.1"}, "/j/rsh"), "\n")
	// The daemons mpirun starts on other nodes find the agent by name on
	// their own PATH (the path of node 0's folder is not there), and stay
	// attached to their launch, so that their end reaches mpirun.
	for _, kv := range []string{"OMPI_MCA_plm_rsh_agent=rsh", "OMPI_MCA_orte_leave_session_attached=1", "HYDRA_LAUNCHER_EXEC=/j/rsh", "WORLD_SIZE=4", "NODE_RANK=1", "OMPI_MCA_btl=^vader", "OMPI_MCA_btl_tcp_if_include=lo"} {
		if !strings.Contains(local, kv+"\n") && !strings.HasSuffix(local, kv) {
			t.Errorf("local nodes' env lacks %s:\n%s", kv, local)
		}
	}
	remote := strings.Join(MPIEnv(d, 0, []string{"10.0.0.1", "10.0.0.2"}, "/j/rsh"), "\n")
	if strings.Contains(remote, "if_include=lo") || strings.Contains(remote, "vader") {
		t.Errorf("nodes on separate machines are limited to loopback:\n%s", remote)
	}
	if got := LauncherAddrs(d, []string{"10.0.0.1", "10.0.0.2"}); got != "10.0.0.1:29501,10.0.0.2:29502" {
		t.Errorf("launcher addresses = %q", got)
	}
}
