package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/slurm"
	"github.com/cumulus-ml/cumulus/internal/provider/slurm/slurmtest"
)

// The Slurm provider end to end: a real `cumulus serve --provider slurm`
// submitting node jobs to a real Slurm (slurmtest: munged, slurmctld and
// slurmd on loopback, one machine of 64 CPUs and four GPUs as GRES on
// stand-in device files), whose jobs run the real agent; the machine's
// nvidia-smi is a stand-in (a test double) reporting those four GPUs.

type slurmServer struct {
	*server
	slurm *slurmtest.Cluster
	work  string // the node jobs' work dirs
}

func startSlurmServer(t testing.TB, args ...string) *slurmServer {
	t.Helper()
	// Made before the Slurm: removed after it stopped, its jobs ended.
	bin, logs, work := t.TempDir(), t.TempDir(), t.TempDir()
	c := slurmtest.Start(t, slurmtest.Machine{})
	t.Setenv("SLURM_CONF", c.Conf)
	// sbatch exports the server's environment to node jobs: their agents
	// find the stand-in nvidia-smi.
	if _, err := gputest.StandIn(bin, gputest.Four()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	s := startServerTB(t, append([]string{"--provider", "slurm", "--slurm-work-dir", work, "--slurm-log-dir", logs,
		"--slurm-node-address", "127.0.0.0/8", "--slurm-poll-interval", "200ms",
		"--slurm-low-priority-partition", slurmtest.Spot}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				t.Logf("node job output %s:\n%s", filepath.Base(f), tail(string(b), 3000))
			}
			t.Logf("Slurm's jobs: %q", c.Jobs())
		}
	})
	return &slurmServer{server: s, slurm: c, work: work}
}

// createSlurmCompute makes a cluster of a size and tier, min 0.
func (s *slurmServer) createSlurmCompute(name, size, priority string, max int32, idle string) {
	s.t.Helper()
	if _, err := s.putSlurmCompute(name, size, priority, max, idle); err != nil {
		s.t.Fatal(err)
	}
}

func (s *slurmServer) putSlurmCompute(name, size, priority string, max int32, idle string, grace ...string) (api.Compute, error) {
	zero := int32(0)
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.VMSize, a.VMPriority, a.PreemptionGracePeriod = size, priority, "PT2S"
	if len(grace) > 0 {
		a.PreemptionGracePeriod = grace[0]
	}
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}
	out, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		return out, err
	}
	return out, s.c.Wait(bctx, resp, nil)
}

// slurmJobOf is the Slurm job of a node, pending or running.
func (s *slurmServer) slurmJobOf(node string) string {
	s.t.Helper()
	ids := s.slurm.Live(node)
	if len(ids) != 1 {
		s.t.Fatalf("node %s has Slurm jobs %v; want one", node, ids)
	}
	return ids[0]
}

// liveNodeJobs are the node jobs pending or running in Slurm.
func (s *slurmServer) liveNodeJobs() []string {
	var out []string
	for _, j := range s.slurm.Jobs() {
		if f := strings.Fields(j); len(f) == 4 && strings.HasPrefix(f[1], "tvm-") && (f[2] == "RUNNING" || f[2] == "PENDING") {
			out = append(out, j)
		}
	}
	return out
}

// Two 2-GPU jobs run at once on two nodes, each a Slurm job given two of
// the machine's four GPUs: each job sees exactly its node's GRES devices
// (CUDA_VISIBLE_DEVICES as Slurm set it), and no device twice.
func TestSlurmGPUJobsGetSlurmsDevices(t *testing.T) {
	s := startSlurmServer(t)
	s.createSlurmCompute("slurm-gpu", "Standard_NC12s_v3", api.PriorityDedicated, 2, "PT60S")
	barrier := t.TempDir()
	job := fmt.Sprintf(`echo "devices=[$CUDA_VISIBLE_DEVICES]"; touch %[1]s/$CUMULUS_JOB_NAME
while [ "$(ls %[1]s | wc -l)" -lt 2 ]; do sleep 0.1; done`, barrier)
	s.submit("g-a", "slurm-gpu", job)
	s.submit("g-b", "slurm-gpu", job)
	seen := map[int]string{}
	for _, name := range []string{"g-a", "g-b"} {
		j := s.waitJob(name, api.JobCompleted, 120*time.Second)
		node := j.Properties.Attempts[0].Nodes[0]
		log := s.jobLog(name)
		i := strings.Index(log, "devices=[")
		if i < 0 {
			t.Fatalf("log of %s = %q", name, log)
		}
		list := log[i+len("devices=["):]
		list = list[:strings.Index(list, "]")]
		var got []int
		for _, f := range strings.Split(list, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s saw CUDA_VISIBLE_DEVICES=%q", name, list)
			}
			got = append(got, n)
			if other, ok := seen[n]; ok {
				t.Errorf("GPU %d was given to %s and %s", n, other, name)
			}
			seen[n] = name
		}
		slices.Sort(got)
		if want := s.gresOf(node); !slices.Equal(got, want) {
			t.Errorf("%s on node %s saw GPUs %v; Slurm gave its node job %v", name, node, got, want)
		}
	}
	if len(seen) != 4 {
		t.Errorf("the two jobs saw GPUs %v; want four distinct", seen)
	}
}

// gresOf is the GPUs Slurm gave a node's job, which may have ended: its
// agent's log says which it offered, and Slurm's record (kept for
// MinJobAge) which it was given.
func (s *slurmServer) gresOf(node string) []int {
	s.t.Helper()
	for _, j := range s.slurm.Jobs() {
		if f := strings.Fields(j); len(f) == 4 && f[1] == node {
			idx := s.slurm.GPUIndexes(f[0])
			slices.Sort(idx)
			return idx
		}
	}
	s.t.Fatalf("no Slurm job of node %s: %q", node, s.slurm.Jobs())
	return nil
}

// A size whose nodes no machine of the partition can hold (8 GPUs; the
// machine has 4) is refused when the compute is created, with Slurm's
// words, so no job can wait for it forever; a Slurm placement in a
// partition that does not exist is refused too.
func TestSlurmSizeBeyondTheMachinesRefusedAtCreate(t *testing.T) {
	s := startSlurmServer(t)
	_, err := s.putSlurmCompute("too-big", "Standard_ND96asr_v4", api.PriorityDedicated, 1, "PT60S")
	if err == nil || !strings.Contains(err.Error(), "Requested node configuration is not available") || !strings.Contains(err.Error(), "8 GPUs") {
		t.Fatalf("creating an 8-GPU compute = %v; want a refusal with Slurm's words", err)
	}
	if _, err := s.c.GetCompute(bctx, "too-big"); err == nil {
		t.Error("the refused compute exists")
	}
	s.submitRefused(t, "never", "too-big")
	if jobs := s.liveNodeJobs(); len(jobs) != 0 {
		t.Errorf("node jobs were submitted: %q", jobs)
	}

	// A preempted node job gets Slurm's KillWait (30 s here) after SIGTERM:
	// a grace period its agent could not have is refused.
	_, err = s.putSlurmCompute("slow-spot", "Standard_DS3_v2", api.PriorityLowPriority, 1, "PT60S", "PT60S")
	if err == nil || !strings.Contains(err.Error(), "KillWait") || !strings.Contains(err.Error(), "preemptionGracePeriod") {
		t.Errorf("a low-priority compute with a 60 s preemption grace = %v; want a refusal naming KillWait", err)
	}

	dir := t.TempDir()
	write(t, filepath.Join(dir, "compute.yml"), "name: nowhere\ntype: amlcompute\nsize: Standard_DS3_v2\nmax_instances: 1\nslurm:\n  partition: nope\n")
	_, errOut, code := s.cli(dir, "compute", "create", "--file", "compute.yml")
	if code == 0 || !strings.Contains(errOut, "nope") {
		t.Errorf("a compute in partition nope: exit %d, %q; want a refusal naming it", code, errOut)
	}
}

// submitRefused submits a job to a compute and wants it refused.
func (s *slurmServer) submitRefused(t *testing.T, name, compute string) {
	t.Helper()
	j := api.Job{Name: name, Properties: api.JobProperties{Command: "true", ComputeID: compute}}
	if _, err := s.c.PutJob(bctx, j); err == nil {
		t.Errorf("job %s on compute %s was accepted", name, compute)
	}
}

// A node's Slurm job cancelled from outside (scancel) ends the node at
// once — the heartbeat timeout is far off — and its Cumulus job is
// requeued, with Slurm's reason, and completes on a new node.
func TestSlurmNodeCancelledFromOutsideRequeuesItsJob(t *testing.T) {
	s := startSlurmServer(t, "--heartbeat-timeout", "10m")
	s.createSlurmCompute("slurm-cpu", "Standard_DS3_v2", api.PriorityDedicated, 1, "PT60S")
	s.submit("victim", "slurm-cpu", `if [ "$CUMULUS_ATTEMPT" = 1 ]; then echo started; sleep 300; fi; echo "attempt $CUMULUS_ATTEMPT done"`)
	waitFor(t, "the job to run", 90*time.Second, func() bool { return strings.Contains(s.jobLog("victim"), "started") })
	node := s.nodeOf("victim", 0)
	id := s.slurmJobOf(node)
	s.slurm.Must("scancel", id)
	j := s.waitJob("victim", api.JobCompleted, 120*time.Second)
	at := j.Properties.Attempts
	if len(at) != 2 || at[1].Nodes[0] == node {
		t.Fatalf("attempts = %+v; want a second on another node", at)
	}
	if want := "Slurm job " + id + " was cancelled"; !strings.Contains(at[0].Reason, want) {
		t.Errorf("attempt 1 ended %q; want Slurm's reason (%s)", at[0].Reason, want)
	}
	if !strings.Contains(s.jobLog("victim"), "attempt 2 done") {
		t.Errorf("log of attempt 2 = %q", s.jobLog("victim"))
	}
}

// Idle nodes are cancelled after the idle time, as the compute's history
// shows (each node leaves at least the idle time after it became idle): no
// node job is left pending or running, and each node's work dir on its
// machine is gone.
func TestSlurmIdleNodesCancelledAfterIdleTime(t *testing.T) {
	s := startSlurmServer(t)
	s.createSlurmCompute("slurm-idle", "Standard_DS3_v2", api.PriorityDedicated, 2, "PT3S")
	s.submit("i-1", "slurm-idle", `echo one; sleep 1`)
	s.submit("i-2", "slurm-idle", `echo two; sleep 1`)
	s.waitJob("i-1", api.JobCompleted, 120*time.Second)
	s.waitJob("i-2", api.JobCompleted, 120*time.Second)
	waitFor(t, "the idle nodes' Slurm jobs cancelled", 60*time.Second, func() bool {
		comp, err := s.c.GetCompute(bctx, "slurm-idle")
		return err == nil && comp.Aml().CurrentNodeCount == 0 && len(s.liveNodeJobs()) == 0
	})
	evs, err := s.c.ComputeEvents(bctx, "slurm-idle", client.EventQuery{Types: []string{api.EventNodeIdle, api.EventNodeLeaving}})
	if err != nil {
		t.Fatal(err)
	}
	idle, left := map[string]time.Time{}, map[string]time.Time{}
	for _, e := range evs { // newest first: the last time a node became idle
		m := left
		if e.Type == api.EventNodeIdle {
			m = idle
		}
		if _, ok := m[e.Node]; !ok {
			m[e.Node] = e.Time
		}
	}
	if len(left) != 2 {
		t.Fatalf("%d nodes left; want 2: %+v", len(left), evs)
	}
	for node, at := range left {
		if since, ok := idle[node]; !ok || at.Sub(since) < 3*time.Second {
			t.Errorf("node %s left at %s, %s after it became idle (%s); want the idle time, 3 s", node, at, at.Sub(since), since)
		}
	}
	waitFor(t, "the nodes' work dirs removed", 60*time.Second, func() bool {
		ents, _ := os.ReadDir(s.work)
		return len(ents) == 0
	})
}

// A control plane killed and started again keeps its nodes: a node whose
// Slurm job still runs keeps its job, which completes there; a node whose
// Slurm job was cancelled while it was down has its job requeued; a node
// job of this control plane without a node record is cancelled.
func TestSlurmRestartKeepsAndReconcilesNodes(t *testing.T) {
	s := startSlurmServer(t)
	s.createSlurmCompute("slurm-rst", "Standard_DS3_v2", api.PriorityDedicated, 2, "PT60S")
	gate := filepath.Join(t.TempDir(), "gate")
	s.submit("kept", "slurm-rst", fmt.Sprintf(`echo "attempt $CUMULUS_ATTEMPT"; while [ ! -e %s ]; do sleep 0.2; done`, gate))
	s.submit("lost", "slurm-rst", `echo "attempt $CUMULUS_ATTEMPT"; if [ "$CUMULUS_ATTEMPT" = 1 ]; then sleep 300; fi`)
	waitFor(t, "both jobs to run", 120*time.Second, func() bool {
		return strings.Contains(s.jobLog("kept"), "attempt 1") && strings.Contains(s.jobLog("lost"), "attempt 1")
	})
	keptNode, lostNode := s.nodeOf("kept", 0), s.nodeOf("lost", 0)
	keptJob := s.slurmJobOf(keptNode)
	s.kill9()

	s.slurm.Must("scancel", s.slurmJobOf(lostNode))
	owner, _ := filepath.Abs(s.dataDir)
	p, err := slurm.New(bctx, slurm.Options{Owner: owner, AgentBinary: binary, WorkDir: s.work, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(bctx, provider.NodeSpec{NodeID: "tvm-orphan-1", VCPUs: 1, MemoryGB: 1, ServerURL: "http://" + s.addr, JoinToken: "nope"}); err != nil {
		t.Fatal(err)
	}
	s.start()
	waitFor(t, "the orphan node job cancelled", 60*time.Second, func() bool { return len(s.slurm.Live("tvm-orphan-1")) == 0 })
	lost := s.waitJob("lost", api.JobCompleted, 120*time.Second)
	if at := lost.Properties.Attempts; len(at) != 2 || at[1].Nodes[0] == lostNode {
		t.Errorf("attempts of the job whose node was cancelled = %+v; want a second elsewhere", at)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := s.waitJob("kept", api.JobCompleted, 60*time.Second)
	if at := kept.Properties.Attempts; len(at) != 1 || at[0].Nodes[0] != keptNode {
		t.Errorf("attempts of the job on the kept node = %+v; want one, on %s", at, keptNode)
	}
	if ids := s.slurm.Live(keptNode); len(ids) != 1 || ids[0] != keptJob {
		t.Errorf("the kept node's Slurm jobs are %v; want still %s", ids, keptJob)
	}
}

// A low-priority compute's nodes run in the spot partition. A job of a
// partition of higher priority tier makes Slurm preempt the node: the
// Cumulus job stops (it has its checkpoint) and is requeued as a
// preemption; its new node waits in Slurm's queue, which the compute's
// ScaleUpBlocked says; when the machine is free again the job resumes from
// its checkpoint.
func TestSlurmPreemptionRequeuesAndResumesFromCheckpoint(t *testing.T) {
	s := startSlurmServer(t, "--heartbeat-timeout", "10m")
	s.createSlurmCompute("slurm-spot", "Standard_DS3_v2", api.PriorityLowPriority, 1, "PT60S")
	s.submit("resumable", "slurm-spot", checkpointing)
	s.checkpointed("resumable")
	victim := s.nodeOf("resumable", 0)
	if job := s.slurm.Must("scontrol", "show", "job", s.slurmJobOf(victim)); !strings.Contains(job, "Partition="+slurmtest.Spot) {
		t.Fatalf("the low-priority node's job is not in the spot partition:\n%s", job)
	}
	urgent := s.slurm.Submit("#!/bin/sh\nsleep 600\n", "--partition="+slurmtest.Urgent, "--cpus-per-task=64", "--mem=1000")
	var blocked string
	waitFor(t, "the job requeued and its new node waiting in Slurm's queue", 90*time.Second, func() bool {
		j := s.job("resumable")
		comp, err := s.c.GetCompute(bctx, "slurm-spot")
		if err != nil || len(j.Properties.Attempts) < 1 || j.Properties.Attempts[0].Ended == nil {
			return false
		}
		for _, e := range comp.Aml().Errors {
			if e.Error.Code == api.CodeScaleUpBlocked && strings.Contains(e.Error.Message, "Slurm's queue (partition spot)") {
				blocked = e.Error.Message
				return true
			}
		}
		return false
	})
	t.Logf("while preempted: %s", blocked)
	if r := s.job("resumable").Properties.Attempts[0].Reason; !strings.Contains(r, "preempted") {
		t.Errorf("attempt 1 ended %q; want a preemption", r)
	}
	s.slurm.Must("scancel", urgent)
	j := s.waitJob("resumable", api.JobCompleted, 120*time.Second)
	if at := j.Properties.Attempts; len(at) != 2 || at[1].Nodes[0] == victim {
		t.Fatalf("attempts = %+v; want two, the second on a new node", at)
	}
	if log := s.jobLog("resumable"); !strings.Contains(log, "attempt=2 found=1") {
		t.Fatalf("attempt 2 log = %q; want it to find attempt 1's checkpoint", log)
	}
}

// A 2-node PyTorch job on two node jobs: the ranks rendezvous at rank 0's
// address with the same variables as on every provider.
func TestSlurmRanksRendezvous(t *testing.T) {
	bin := buildRendezvous(t)
	s := startSlurmServer(t)
	s.createSlurmCompute("slurm-dist", "Standard_DS3_v2", api.PriorityDedicated, 2, "PT60S")
	s.submitJob(distributedJob("slurm-torch", "slurm-dist", `echo "master=$MASTER_ADDR rank=$RANK world=$WORLD_SIZE"; `+bin, 2, "PyTorch", 1))
	s.waitJob("slurm-torch", api.JobCompleted, 120*time.Second)
	if got := s.rankLog("slurm-torch", 0); !strings.Contains(got, "rank 0 of 2: sum=1") {
		t.Fatalf("rank 0 log = %q", got)
	}
	if got := s.rankLog("slurm-torch", 1); !strings.Contains(got, "master=127.0.0.1 rank=1 world=2") {
		t.Errorf("rank 1 log = %q", got)
	}
}

// BenchmarkSlurmScaleFromZero: a job submitted to an empty cluster on the
// slurm provider; Queued→Running includes sbatch, Slurm scheduling the
// node job (its main loop runs every second here, and at each submission),
// slurmd starting the batch script, the agent starting and registering,
// and the job starting.
//
//	go test ./test/cluster/ -run '^$' -bench SlurmScaleFromZero -benchtime 20x
func BenchmarkSlurmScaleFromZero(b *testing.B) {
	s := startSlurmServer(b, "--log-level", "warn")
	s.createSlurmCompute("scold", "Standard_DS3_v2", api.PriorityDedicated, 1, "PT0S")
	benchFromZero(b, s.server, "scold", func() bool { return len(s.liveNodeJobs()) == 0 })
}

// BenchmarkSlurmBurst: 30 jobs submitted at once to an empty cluster of
// max 30 on the slurm provider (30 node jobs of 2 CPUs on the test
// machine's 64); each job's Queued→Running, and until the last runs
// ("all-ms").
//
//	go test ./test/cluster/ -run '^$' -bench SlurmBurst -benchtime 3x
func BenchmarkSlurmBurst(b *testing.B) {
	s := startSlurmServer(b, "--log-level", "warn")
	s.createSlurmCompute("sburst", "Standard_DS2_v2", api.PriorityDedicated, 30, "PT0S")
	benchBurst(b, s.server, "sburst", 30, 180*time.Second, func() bool { return len(s.liveNodeJobs()) == 0 })
}

// With the control plane's own certificate (--tls-self-signed), node jobs
// get its CA through their environment (never a file the compute nodes
// would need) and their agents join over TLS.
func TestSlurmAgentsTrustTheSelfSignedCA(t *testing.T) {
	s := startSlurmServer(t, "--tls-self-signed")
	s.createSlurmCompute("slurm-tls", "Standard_DS3_v2", api.PriorityDedicated, 1, "PT60S")
	s.submit("over-tls", "slurm-tls", `echo "hello over TLS"`)
	s.waitJob("over-tls", api.JobCompleted, 120*time.Second)
	if log := s.jobLog("over-tls"); !strings.Contains(log, "hello over TLS") {
		t.Errorf("log = %q", log)
	}
}
