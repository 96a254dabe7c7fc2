package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// gangCases × gangSteps random worlds: gangs of random sizes submitted,
// their ranks ending in random order with random codes, agents stopping
// what they were told to, nodes going silent, the clock jumping past idle
// timeouts, and a cluster pass after every step.
const (
	gangCases = 60
	gangSteps = 40
)

// The scheduler and autoscaler never hand out or remove a node of a job
// that has not ended — a node whose rank ended included — and the
// transitions keep every such job on nodes that hold it, so the
// controller's check for jobs that lost a node never has to act.
func TestGangNodesAreNeverHandedOutOrRemoved(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 2026))
	for i := range gangCases {
		seed := r.Uint64()
		t.Run(fmt.Sprint(i), func(t *testing.T) { gangWorld(t, rand.New(rand.NewPCG(seed, 1))) })
	}
}

func gangWorld(t *testing.T, r *rand.Rand) {
	h := newHarness(t)
	maxNodes := 2 + r.IntN(4)
	c := h.compute("gang", int32(r.IntN(2)), int32(maxNodes), "PT1M")
	silent := map[string]bool{} // nodes whose agents stopped answering
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nsteps:\n%s", fmt.Sprintf(format, args...), strings.Join(log, "\n"))
	}
	for step := range gangSteps {
		switch k := r.IntN(10); {
		case k < 3:
			n := 1 + r.IntN(maxNodes)
			log = append(log, fmt.Sprintf("%d: submit %s of %d nodes", step, h.submit(c, int32(n)), n))
		case k < 7:
			if j, rank, ok := runningRank(h, c, r); ok {
				code := 0
				if r.IntN(5) == 0 {
					code = 1 + r.IntN(3)
				}
				log = append(log, fmt.Sprintf("%d: %s rank %d (%s) exits %d", step, j.UID, rank, j.Nodes[rank], code))
				h.rankEnded(j.UID, rank, code)
			}
		case k < 8:
			if nodes := h.nodes(c); len(nodes) > 0 {
				n := nodes[r.IntN(len(nodes))]
				silent[n.ID] = true
				log = append(log, fmt.Sprintf("%d: node %s goes silent", step, n.ID))
			}
		default:
			d := time.Duration(r.IntN(150)) * time.Second
			h.clk.Step(d)
			log = append(log, fmt.Sprintf("%d: clock +%s", step, d))
		}
		playAgents(h, c, silent)
		before := activeNodes(h, c)
		deleted := len(h.prov.DeleteCalls)
		h.pass()
		after := activeNodes(h, c)
		for _, id := range h.prov.DeleteCalls[deleted:] {
			if uid, ok := before[id]; ok && after[id] == uid {
				fail("step %d: node %s of running job %s was removed", step, id, uid)
			}
		}
		for id, uid := range after {
			if was, ok := before[id]; ok && was != uid {
				fail("step %d: node %s of job %s was handed to job %s", step, id, was, uid)
			}
		}
		checkGangsHold(h, c, fail, step)
	}
}

// activeNodes maps each node of a job that has not ended (by its current
// attempt) to that job, and fails on a node two such jobs share.
func activeNodes(h *harness, c api.Compute) map[string]string {
	h.t.Helper()
	jobs, err := store.JobsByStatus(h.ctx, h.db.Q(), c.ID, api.JobPreparing, api.JobStarting, api.JobRunning, api.JobFinalizing, api.JobCancelRequested)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, j := range jobs {
		for _, id := range j.Nodes {
			if other, ok := out[id]; ok {
				h.t.Fatalf("node %s is in the attempts of both %s and %s", id, other, j.UID)
			}
			out[id] = j.UID
		}
	}
	return out
}

// checkGangsHold checks that every job that has not ended holds each node
// of its attempt, and that no attempt ended for a lost node.
func checkGangsHold(h *harness, c api.Compute, fail func(string, ...any), step int) {
	jobs, err := store.JobsByStatus(h.ctx, h.db.Q(), c.ID, api.JobQueued, api.JobPreparing, api.JobStarting, api.JobRunning,
		api.JobFinalizing, api.JobCancelRequested, api.JobCompleted, api.JobFailed)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, j := range jobs {
		for _, a := range j.Doc.Properties.Attempts {
			if strings.Contains(a.Reason, "of the job's attempt") {
				fail("step %d: job %s attempt %d ended for a lost node: %s", step, j.UID, a.Number, a.Reason)
			}
		}
		if api.JobTerminal(j.Doc.Properties.Status) {
			continue
		}
		for _, id := range j.Nodes {
			n, err := store.GetNode(h.ctx, h.db.Q(), id)
			if err != nil || n.JobID != j.UID {
				fail("step %d: job %s (%s) lost node %s (%v, holds %q)", step, j.UID, j.Doc.Properties.Status, id, err, n.JobID)
			}
		}
	}
}

// runningRank picks a rank of a running job that has not ended.
func runningRank(h *harness, c api.Compute, r *rand.Rand) (store.Job, int, bool) {
	jobs, err := store.JobsByStatus(h.ctx, h.db.Q(), c.ID, api.JobRunning)
	if err != nil {
		h.t.Fatal(err)
	}
	var picks []struct {
		j    store.Job
		rank int
	}
	for _, j := range jobs {
		for rank, id := range j.Nodes {
			if _, ended := j.Exits[id]; !ended {
				picks = append(picks, struct {
					j    store.Job
					rank int
				}{j, rank})
			}
		}
	}
	if len(picks) == 0 {
		return store.Job{}, 0, false
	}
	p := picks[r.IntN(len(picks))]
	return p.j, p.rank, true
}

// playAgents does what the agents of the cluster's nodes would by now:
// the silent ones nothing; the others heartbeat, register, start the
// parts they were given, and stop (reporting 143) the parts of attempts
// that no longer run on them.
func playAgents(h *harness, c api.Compute, silent map[string]bool) {
	h.t.Helper()
	for _, n := range h.nodes(c) {
		if silent[n.ID] {
			continue
		}
		h.c.Hub.Seen(n.ID, h.clk.Now())
		if n.State == api.NodePreparing {
			n.State, n.Ready, n.IdleSince = api.NodeIdle, h.clk.Now(), h.clk.Now()
			h.tx(func(q store.Querier) error { return store.PutNode(h.ctx, q, n) })
			continue
		}
		if n.JobID == "" {
			continue
		}
		h.tx(func(q store.Querier) error {
			j, err := store.GetJobByUID(h.ctx, q, n.JobID)
			if err != nil {
				return err
			}
			_, ended := j.Exits[n.ID]
			switch st := j.Doc.Properties.Status; {
			case !slices.Contains(j.Nodes, n.ID) || api.JobTerminal(st) || st == api.JobCancelRequested:
				return lifecycle.Exited(h.ctx, q, j, n.ID, lastAttemptOn(j, n.ID), 143, "stopped", h.clk.Now())
			case st == api.JobPreparing && !ended:
				return lifecycle.Started(h.ctx, q, j, n.ID, j.Attempt, h.clk.Now())
			}
			return nil
		})
	}
}

// lastAttemptOn is the latest attempt of j that ran on node.
func lastAttemptOn(j store.Job, node string) int {
	as := j.Doc.Properties.Attempts
	for i := len(as) - 1; i >= 0; i-- {
		if slices.Contains(as[i].Nodes, node) {
			return as[i].Number
		}
	}
	return j.Attempt
}
