package distrib

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// MPI jobs are launched as Azure ML launches them: mpirun (or Hydra's
// mpiexec) runs on the first node with a hostfile of every node, and
// starts the MPI daemons of the other nodes through Cumulus instead of
// SSH. Each other node runs a launcher that listens on LauncherPort and
// runs the one daemon node 0 asks for, as the job's process there;
// mpirun reaches it with an rsh agent (the cumulus-mpi-rsh helper) that
// maps the hostfile's names to the launchers.

// MPI implementations the agent can launch with.
const (
	OpenMPI = "openmpi"
	Hydra   = "hydra" // MPICH, Intel MPI
)

// HostName is the name of node rank in the hostfile; node 0 is
// "localhost" (mpirun runs there), the others are reached through the
// rsh helper, which knows them from LauncherAddrs.
func HostName(rank int) string {
	if rank == 0 {
		return "localhost"
	}
	return "cumulus-node-" + strconv.Itoa(rank)
}

// NodeOfHost is HostName's inverse.
func NodeOfHost(host string) (int, bool) {
	if host == "localhost" {
		return 0, true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(host, "cumulus-node-"))
	if err != nil || !strings.HasPrefix(host, "cumulus-node-") || n < 1 {
		return 0, false
	}
	return n, true
}

// LauncherPort is where node rank's launcher listens: in the job's block
// of ports, after the master port.
func LauncherPort(d *agentapi.Distribution, rank int) int { return d.MasterPort + 1 + rank }

// LauncherAddrs is every node's launcher address, by rank, comma-separated.
func LauncherAddrs(d *agentapi.Distribution, nodeIPs []string) string {
	addrs := make([]string, len(nodeIPs))
	for i, ip := range nodeIPs {
		addrs[i] = net.JoinHostPort(ip, strconv.Itoa(LauncherPort(d, i)))
	}
	return strings.Join(addrs, ",")
}

// MPIHostfile is the hostfile of an MPI launch: one line per node with
// its slots (processes per node), in the implementation's format.
func MPIHostfile(impl string, nodes, ppn int) string {
	var b strings.Builder
	for r := range max(nodes, 1) {
		if impl == Hydra {
			fmt.Fprintf(&b, "%s:%d\n", HostName(r), max(ppn, 1))
		} else {
			fmt.Fprintf(&b, "%s slots=%d\n", HostName(r), max(ppn, 1))
		}
	}
	return b.String()
}

// MPICommand is node 0's command line: mpirun over every node's slots,
// each rank running the job's command with the shell.
func MPICommand(impl, launcher, hostfile, rsh string, world int, command string) []string {
	if impl == Hydra {
		return []string{launcher, "-f", hostfile, "-n", strconv.Itoa(world),
			"-launcher", "rsh", "-launcher-exec", rsh, "/bin/sh", "-c", command}
	}
	return []string{launcher, "--hostfile", hostfile, "-np", strconv.Itoa(world), "/bin/sh", "-c", command}
}

// MPIEnv is the environment of a node's process in an MPI launch: the
// job's peers as Azure ML names them (mpirun sets each rank's own
// OMPI_COMM_WORLD_* and PMI_* variables), and Open MPI settings that make
// a bare `mpirun --hostfile $CUMULUS_HOSTFILE` work too: the rsh helper
// as launch agent, no tree spawn (each node's helper lives in its own
// job folder), and daemons that stay attached to their launch (not
// --daemonize'd), so that a daemon's end and its messages reach mpirun.
// Open MPI names the launch agent to the daemons it starts, which check
// that it exists: it is named by its file name, which every node finds on
// its own PATH (the agent puts its helpers' folder there), since another
// node's folder is not there (another machine, or hidden from the job).
// When every node is on this machine (all loopback), MPI talks over
// loopback only and without shared memory between "nodes".
func MPIEnv(d *agentapi.Distribution, nodeRank int, nodeIPs []string, rsh string) []string {
	nodes := max(len(nodeIPs), 1)
	ppn := max(d.ProcessesPerNode, 1)
	master := "127.0.0.1"
	if len(nodeIPs) > 0 {
		master = nodeIPs[0]
	}
	port := strconv.Itoa(d.MasterPort)
	env := []string{
		"MASTER_ADDR=" + master, "MASTER_PORT=" + port,
		"WORLD_SIZE=" + strconv.Itoa(nodes*ppn), "NODE_RANK=" + strconv.Itoa(nodeRank),
		"CUMULUS_WORLD_SIZE=" + strconv.Itoa(nodes*ppn),
		"AZ_BATCH_MASTER_NODE=" + master + ":" + port, "AZ_BATCHAI_MPI_MASTER_NODE=" + master,
		"AZ_BATCH_HOST_LIST=" + strings.Join(nodeIPs, ","),
		"OMPI_MCA_plm_rsh_agent=" + filepath.Base(rsh), "OMPI_MCA_plm_rsh_no_tree_spawn=1", "OMPI_MCA_orte_leave_session_attached=1",
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"HYDRA_LAUNCHER=rsh", "HYDRA_LAUNCHER_EXEC=" + rsh,
	}
	if allLoopback(nodeIPs) {
		env = append(env, "OMPI_MCA_btl=^vader", "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_oob_tcp_if_include=lo")
	}
	return env
}

// allLoopback reports whether every node's address is a loopback one (the
// local provider: every node is on this machine).
func allLoopback(ips []string) bool {
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return len(ips) > 0
}

// MPIImpl tells the implementation from `mpirun --version` output; "" when
// it is neither.
func MPIImpl(version string) string {
	v := strings.ToLower(version)
	switch {
	case strings.Contains(v, "open mpi"), strings.Contains(v, "open-mpi"), strings.Contains(v, "open rte"):
		return OpenMPI
	case strings.Contains(v, "hydra"), strings.Contains(v, "mpich"), strings.Contains(v, "intel"):
		return Hydra
	}
	return ""
}
