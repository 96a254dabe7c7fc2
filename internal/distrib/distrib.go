// Package distrib computes the environment of each process of a
// distributed job: the variables PyTorch, MPI and TensorFlow read to find
// their peers, plus Cumulus's own (like SkyPilot's) and Azure ML's names
// where Azure defines them. It is pure: the agent brings the numbers.
package distrib

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Process is one process of the job as the agent starts it.
type Process struct {
	Rank      int      // global rank, 0 … world-1
	LocalRank int      // rank on this node
	Env       []string // KEY=VALUE to add to the node's environment
	// Argv, when set, is what the process runs instead of the job's
	// command with the shell (an MPI launch's mpirun or launcher).
	Argv []string
}

// Types of distribution (lower case).
const (
	MPI        = "mpi"
	PyTorch    = "pytorch"
	TensorFlow = "tensorflow"
)

// Processes returns the processes one node starts for its part of a job,
// nodeRank among nodeIPs (one entry per node, by rank). Without a
// distribution a node runs one process.
func Processes(d *agentapi.Distribution, nodeRank int, nodeIPs []string) ([]Process, error) {
	nodes := max(len(nodeIPs), 1)
	if len(nodeIPs) == 0 {
		nodeIPs = []string{"127.0.0.1"}
	}
	if nodeRank < 0 || nodeRank >= nodes {
		return nil, fmt.Errorf("node rank %d is outside the job's %d nodes", nodeRank, nodes)
	}
	if d == nil {
		return []Process{{Rank: nodeRank, LocalRank: 0}}, nil
	}
	ppn := max(d.ProcessesPerNode, 1)
	world := nodes * ppn
	master := nodeIPs[0]
	port := strconv.Itoa(d.MasterPort)
	out := make([]Process, 0, ppn)
	for local := 0; local < ppn; local++ {
		rank := nodeRank*ppn + local
		env := []string{
			"MASTER_ADDR=" + master, "MASTER_PORT=" + port,
			"WORLD_SIZE=" + strconv.Itoa(world), "RANK=" + strconv.Itoa(rank),
			"LOCAL_RANK=" + strconv.Itoa(local), "LOCAL_WORLD_SIZE=" + strconv.Itoa(ppn),
			"NODE_RANK=" + strconv.Itoa(nodeRank), "GROUP_RANK=" + strconv.Itoa(nodeRank),
			"CUMULUS_RANK=" + strconv.Itoa(rank), "CUMULUS_WORLD_SIZE=" + strconv.Itoa(world),
		}
		switch strings.ToLower(d.Type) {
		case PyTorch:
		case MPI:
			env = append(env,
				"OMPI_COMM_WORLD_RANK="+strconv.Itoa(rank), "OMPI_COMM_WORLD_SIZE="+strconv.Itoa(world),
				"OMPI_COMM_WORLD_LOCAL_RANK="+strconv.Itoa(local), "OMPI_COMM_WORLD_LOCAL_SIZE="+strconv.Itoa(ppn),
				"OMPI_COMM_WORLD_NODE_RANK="+strconv.Itoa(nodeRank),
				"PMI_RANK="+strconv.Itoa(rank), "PMI_SIZE="+strconv.Itoa(world),
				"AZ_BATCH_MASTER_NODE="+master+":"+port, "AZ_BATCHAI_MPI_MASTER_NODE="+master,
				"AZ_BATCH_HOST_LIST="+strings.Join(nodeIPs, ","),
			)
		case TensorFlow:
			cfg, err := tfConfig(d, rank, world, nodeIPs, ppn)
			if err != nil {
				return nil, err
			}
			env = append(env, "TF_CONFIG="+cfg)
		default:
			return nil, fmt.Errorf("distribution type %q is not one of mpi, pytorch, tensorflow", d.Type)
		}
		out = append(out, Process{Rank: rank, LocalRank: local, Env: env})
	}
	return out, nil
}

// Hostfile is an MPI hostfile: each node with its slots.
func Hostfile(nodeIPs []string, ppn int) string {
	var b strings.Builder
	for _, ip := range nodeIPs {
		fmt.Fprintf(&b, "%s slots=%d\n", ip, max(ppn, 1))
	}
	return b.String()
}

// tfConfig is TF_CONFIG for one process: the first ParameterServers ranks
// are parameter servers, the rest workers; task i listens on MasterPort+1+i
// of its node.
func tfConfig(d *agentapi.Distribution, rank, world int, nodeIPs []string, ppn int) (string, error) {
	ps := d.ParameterServers
	workers := d.WorkerCount
	if workers == 0 {
		workers = world - ps
	}
	if ps < 0 || workers < 1 || workers+ps != world {
		return "", fmt.Errorf("tensorflow: worker_count %d + parameter_server_count %d must equal the job's %d processes", workers, ps, world)
	}
	addr := func(r int) string { return nodeIPs[r/ppn] + ":" + strconv.Itoa(d.MasterPort+1+r) }
	cluster := map[string][]string{}
	for r := 0; r < world; r++ {
		kind := "worker"
		if r < ps {
			kind = "ps"
		}
		cluster[kind] = append(cluster[kind], addr(r))
	}
	task := map[string]any{"type": "worker", "index": rank - ps}
	if rank < ps {
		task = map[string]any{"type": "ps", "index": rank}
	}
	b, err := json.Marshal(map[string]any{"cluster": cluster, "task": task, "environment": "cloud"})
	return string(b), err
}
