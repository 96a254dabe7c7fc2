package slurm

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

const tag = "cumulus-node owner=abcd1234"

func TestParseQueueKeepsThisOwnersJobsOldestFirst(t *testing.T) {
	out := strings.Join([]string{
		tag + "|12|RUNNING|batch|node-b|None",
		"(null)|13|RUNNING|batch|someone-elses|None",
		"cumulus-node owner=ffffffff|14|PENDING|batch|other-plane|Priority",
		tag + "|9|CANCELLED|batch|node-a|None",
		tag + "|15|PENDING|gpu|node-a|Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
		tag + "|| odd line",
		"",
	}, "\n")
	got := parseQueue(out, tag)
	want := []slurmJob{
		{ID: "9", Node: "node-a", State: "CANCELLED", Partition: "batch", Reason: "None"},
		{ID: "12", Node: "node-b", State: "RUNNING", Partition: "batch", Reason: "None"},
		{ID: "15", Node: "node-a", State: "PENDING", Partition: "gpu", Reason: "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseQueue =\n%+v\nwant\n%+v", got, want)
	}
	if n := newest(got)["node-a"]; n.ID != "15" {
		t.Errorf("newest job of node-a is %s; want 15 (made again after job 9 ended)", n.ID)
	}
}

func TestPhases(t *testing.T) {
	for state, want := range map[string]phase{
		"PENDING": phaseStarting, "CONFIGURING": phaseStarting, "RUNNING": phaseRunning, "COMPLETING": phaseEnding,
		"SUSPENDED": phaseSuspended, "CANCELLED": phaseEnded, "PREEMPTED": phaseEnded, "NODE_FAIL": phaseEnded,
		"TIMEOUT": phaseEnded, "SOMETHING_NEW": phaseEnded,
	} {
		if got := phaseOf(state); got != want {
			t.Errorf("phaseOf(%s) = %d; want %d", state, got, want)
		}
	}
}

func job(id, node, state, reason string) slurmJob {
	return slurmJob{ID: id, Node: node, State: state, Partition: "batch", Reason: reason}
}

// The tracker tells each change of a node's newest job once: pending
// reasons as values, an end from outside with Slurm's state, a job that
// left the queue; old jobs of a node made again are not news.
func TestTrackerTellsChangesOnce(t *testing.T) {
	tr := newTracker()
	step := func(jobs ...slurmJob) []provider.Event { return tr.events(jobs) }
	wait := func(reason string) *api.NodeWait {
		return &api.NodeWait{Scheduler: api.SchedulerSlurm, Reason: reason, Queue: "batch"}
	}
	check := func(name string, got []provider.Event, want ...provider.Event) {
		t.Helper()
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: events\n%+v\nwant\n%+v", name, got, want)
		}
	}
	check("a fresh pending job not yet looked at", step(job("1", "a", "PENDING", "None")))
	check("Slurm says why it waits", step(job("1", "a", "PENDING", "Resources")),
		provider.Event{NodeID: "a", Kind: provider.EventPending, Wait: wait("Resources")})
	check("the same reason again", step(job("1", "a", "PENDING", "Resources")))
	check("another reason", step(job("1", "a", "PENDING", "Priority")),
		provider.Event{NodeID: "a", Kind: provider.EventPending, Wait: wait("Priority")})
	check("it runs", step(job("1", "a", "RUNNING", "None")), provider.Event{NodeID: "a", Kind: provider.EventRunning})
	check("it still runs", step(job("1", "a", "RUNNING", "None")))
	check("Slurm ends it", step(job("1", "a", "COMPLETING", "None")),
		provider.Event{NodeID: "a", Kind: provider.EventTerminating, Reason: "Slurm is ending job 1"})
	check("still ending", step(job("1", "a", "COMPLETING", "None")))
	check("ended", step(job("1", "a", "PREEMPTED", "None")),
		provider.Event{NodeID: "a", Kind: provider.EventGone, Reason: "Slurm job 1 was preempted (PREEMPTED)"})
	check("still listed ended", step(job("1", "a", "PREEMPTED", "None")))
	check("made again: the old job is not news", step(job("1", "a", "PREEMPTED", "None"), job("2", "a", "RUNNING", "None")),
		provider.Event{NodeID: "a", Kind: provider.EventRunning})
	check("the new one left the queue at once", step(job("1", "a", "PREEMPTED", "None")),
		provider.Event{NodeID: "a", Kind: provider.EventGone, Reason: "Slurm job 2 left Slurm's queue"})
	check("the old one is still no news", step(job("1", "a", "PREEMPTED", "None")))
	check("all gone", step())
	check("a node first seen running, then gone from the queue", step(job("5", "b", "RUNNING", "None")),
		provider.Event{NodeID: "b", Kind: provider.EventRunning})
	check("gone", step(), provider.Event{NodeID: "b", Kind: provider.EventGone, Reason: "Slurm job 5 left Slurm's queue"})
	check("a node first seen ended", step(job("6", "c", "NODE_FAIL", "None")),
		provider.Event{NodeID: "c", Kind: provider.EventGone, Reason: "Slurm job 6 ended: its machine failed (NODE_FAIL)"})
	check("a suspended node", step(job("6", "c", "NODE_FAIL", "None"), job("7", "d", "SUSPENDED", "None")),
		provider.Event{NodeID: "d", Kind: provider.EventGone, Reason: "Slurm job 7 was suspended, which Cumulus cannot wait out (SUSPENDED)"})

	// Jobs the provider cancels itself end without news.
	check("two running nodes", step(job("8", "e", "RUNNING", "None"), job("9", "f", "RUNNING", "None")),
		provider.Event{NodeID: "e", Kind: provider.EventRunning}, provider.Event{NodeID: "f", Kind: provider.EventRunning})
	tr.cancelled("8")
	tr.cancelled("9")
	check("ending", step(job("8", "e", "COMPLETING", "None"), job("9", "f", "CANCELLED", "None")))
	check("ended, and one left the queue", step(job("8", "e", "CANCELLED", "None")))
	check("both left", step())
	if len(tr.ours) != 0 {
		t.Errorf("cancelled jobs that left the queue are still kept: %v", tr.ours)
	}
}

// The batch script is valid sh with any paths, runs the agent with
// Slurm's allocation and GPUs, and the sbatch flags size and place it.
func TestScriptAndFlags(t *testing.T) {
	o := Options{AgentBinary: "/shared/it's here/cumulus", WorkDir: "/scratch/cumulus", LogDir: "/shared/logs",
		NodeAddress: "10.0.0.0/8", Partition: "gpu", LowPriorityPartition: "scavenger", LowPriorityQOS: "preemptible",
		Account: "ml", SbatchArgs: []string{"--time=7-0"}}
	spec := provider.NodeSpec{NodeID: "tvm-a_1", VCPUs: 6, MemoryGB: 112, GPUs: 1, ServerURL: "https://cp.example:8787", LowPriority: true,
		Slurm: &api.SlurmPlacement{Account: "team"}}
	script := o.script(spec)
	sh := exec.Command("sh", "-n")
	sh.Stdin = strings.NewReader(script)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v: %s\n%s", err, out, script)
	}
	for _, want := range []string{`'/shared/it'\''s here/cumulus' agent --server 'https://cp.example:8787' --node-id 'tvm-a_1' --work-dir "$work" --gpu-devices env:CUDA_VISIBLE_DEVICES --address '10.0.0.0/8' &`,
		`work='/scratch/cumulus/tvm-a_1'`, `CUMULUS_VCPUS="${SLURM_CPUS_ON_NODE:-6}"`, `CUMULUS_MEMORY_MB="${SLURM_MEM_PER_NODE:-114688}"`} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %s:\n%s", want, script)
		}
	}
	got := strings.Join(o.submitArgs(spec, tag), " ")
	want := "--parsable --job-name=tvm-a_1 --comment=" + tag + " --no-requeue --export=ALL --output=/shared/logs/tvm-a_1-%j.log " +
		"--nodes=1 --ntasks=1 --cpus-per-task=6 --mem=114688M --gres=gpu:1 --partition=scavenger --qos=preemptible --account=team --time=7-0"
	if got != want {
		t.Errorf("sbatch flags\n%s\nwant\n%s", got, want)
	}
}
