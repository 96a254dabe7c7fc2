package slurm

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// placement is where a node's Slurm job goes: the compute's own placement
// over the server's defaults, the low-priority ones for a low-priority
// compute.
func (o Options) placement(spec provider.NodeSpec) (partition, qos, account string) {
	partition, qos, account = o.Partition, o.QOS, o.Account
	if spec.LowPriority {
		if o.LowPriorityPartition != "" {
			partition = o.LowPriorityPartition
		}
		if o.LowPriorityQOS != "" {
			qos = o.LowPriorityQOS
		}
	}
	if s := spec.Slurm; s != nil {
		if s.Partition != "" {
			partition = s.Partition
		}
		if s.QOS != "" {
			qos = s.QOS
		}
		if s.Account != "" {
			account = s.Account
		}
	}
	return partition, qos, account
}

// memoryMB is the node's memory in MiB, as --mem asks for it.
func memoryMB(spec provider.NodeSpec) int {
	return max(int(spec.MemoryGB*1024), 1)
}

// resourceArgs are the sbatch flags that size and place a node's job: one
// task on one machine with the VM size's CPUs, memory and GPUs, in its
// partition, QOS and account, then the operator's own flags.
func (o Options) resourceArgs(spec provider.NodeSpec) []string {
	args := []string{"--nodes=1", "--ntasks=1",
		"--cpus-per-task=" + strconv.Itoa(max(spec.VCPUs, 1)),
		"--mem=" + strconv.Itoa(memoryMB(spec)) + "M"}
	if spec.GPUs > 0 {
		args = append(args, "--gres=gpu:"+strconv.Itoa(spec.GPUs))
	}
	partition, qos, account := o.placement(spec)
	if partition != "" {
		args = append(args, "--partition="+partition)
	}
	if qos != "" {
		args = append(args, "--qos="+qos)
	}
	if account != "" {
		args = append(args, "--account="+account)
	}
	return append(args, o.SbatchArgs...)
}

// submitArgs are the flags of the sbatch that submits a node's job: named
// after the node, tagged with this control plane's owner comment, never
// requeued by Slurm (a node whose job ends is gone; Cumulus requeues its
// Cumulus job and makes a new node), the environment sbatch is given
// exported, the agent's log in the log dir.
func (o Options) submitArgs(spec provider.NodeSpec, tag string) []string {
	return append([]string{"--parsable",
		"--job-name=" + spec.NodeID,
		"--comment=" + tag,
		"--no-requeue",
		"--export=ALL",
		"--output=" + path.Join(o.LogDir, spec.NodeID+"-%j.log"),
	}, o.resourceArgs(spec)...)
}

// exitNoAgent is how a node's job ends when the agent binary is not on its
// machine.
const exitNoAgent = 127

// script is the node's batch script: it makes the node's work dir on the
// machine Slurm chose, tells the agent the CPUs and memory Slurm allocated
// and that its GPUs are those in CUDA_VISIBLE_DEVICES (Slurm's GRES), runs
// it, passes Slurm's SIGTERM on, and removes the work dir when the agent
// has exited (ignoring a SIGTERM that comes meanwhile; SIGKILL comes only
// after Slurm's KillWait).
func (o Options) script(spec provider.NodeSpec) string {
	work := path.Join(o.WorkDir, spec.NodeID)
	agent := []string{quote(o.AgentBinary), "agent",
		"--server", quote(spec.ServerURL),
		"--node-id", quote(spec.NodeID),
		"--work-dir", `"$work"`,
		"--gpu-devices", "env:CUDA_VISIBLE_DEVICES"}
	if o.NodeAddress != "" {
		agent = append(agent, "--address", quote(o.NodeAddress))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Cumulus node %s: its agent, offering what Slurm allocated.\n", spec.NodeID)
	fmt.Fprintf(&b, "work=%s\n", quote(work))
	fmt.Fprintf(&b, "if [ ! -x %s ]; then\n  echo \"cumulus: the agent binary \"%s\" is not on $(hostname): put it on a filesystem the compute nodes share (--slurm-agent-binary)\" >&2\n  exit %d\nfi\n",
		quote(o.AgentBinary), quote(o.AgentBinary), exitNoAgent)
	b.WriteString("(umask 077 && mkdir -p \"$work\") || exit 1\n") // the node's own; jobs keep Slurm's umask
	fmt.Fprintf(&b, "export CUMULUS_VCPUS=\"${SLURM_CPUS_ON_NODE:-%d}\" CUMULUS_MEMORY_MB=\"${SLURM_MEM_PER_NODE:-%d}\"\n", max(spec.VCPUs, 1), memoryMB(spec))
	b.WriteString(strings.Join(agent, " ") + " &\n")
	b.WriteString("agent=$!\n")
	b.WriteString("trap 'kill -TERM \"$agent\" 2>/dev/null' TERM INT\n")
	b.WriteString("while :; do wait \"$agent\"; rc=$?; kill -0 \"$agent\" 2>/dev/null || break; done\n")
	b.WriteString("trap '' TERM INT\nrm -rf \"$work\"\nexit \"$rc\"\n") // Slurm's SIGTERM may come as the agent exits
	return b.String()
}

// quote is s as one word of a POSIX shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
