package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// createQueued creates a dedicated compute of at most max nodes with a
// queue policy (nil: Azure's FIFO) and a preemption grace.
func (s *server) createQueued(name string, max int32, p *api.QueuePolicy, grace string) {
	s.t.Helper()
	zero := int32(0)
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT60S"}
	a.QueuePolicy, a.PreemptionGracePeriod = p, grace
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

// principal creates a principal who may submit jobs to the workspace and
// returns a client acting as it.
func (s *server) principal(name string) *client.Client {
	s.t.Helper()
	if _, err := s.c.CreatePrincipal(bctx, name, "User"); err != nil {
		s.t.Fatal(err)
	}
	tok, err := s.c.CreateToken(bctx, name, "")
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.c.AssignRole(bctx, name, "Contributor", s.c.Scope.WorkspaceID()); err != nil {
		s.t.Fatal(err)
	}
	return s.as(tok.Token)
}

func submitAs(t *testing.T, c *client.Client, name, compute, command string) {
	t.Helper()
	if _, err := c.PutJob(bctx, api.Job{Name: name, Properties: api.JobProperties{Command: command, ComputeID: compute}}); err != nil {
		t.Fatal(err)
	}
}

// Two principals share a cluster of at most 2 nodes: alice queues 12 jobs,
// then bob 3. On a FIFO compute bob's first job starts after all of
// alice's; on a fair-share compute it starts within alice's next few, and
// each of bob's jobs says why it waits in fair-share terms.
func TestFairShareBetweenPrincipals(t *testing.T) {
	s := startServer(t)
	alice, bob := s.principal("alice"), s.principal("bob")
	s.createQueued("fifo", 2, nil, "")
	s.createQueued("fair", 2, &api.QueuePolicy{Kind: api.QueuePolicyFairShare}, "")
	for _, compute := range []string{"fifo", "fair"} {
		for i := range 12 {
			submitAs(t, alice, fmt.Sprintf("%s-alice-%02d", compute, i), compute, "sleep 1")
		}
		for i := range 3 {
			submitAs(t, bob, fmt.Sprintf("%s-bob-%d", compute, i), compute, "sleep 1")
		}
	}
	// While they wait, bob's jobs on the fair-share compute say where
	// bob's group stands.
	waitFor(t, "a fair-share reason on bob's job", 30*time.Second, func() bool {
		j := s.job("fair-bob-2")
		return j.Properties.Status != api.JobQueued || strings.Contains(j.Properties.StatusMessage, "bob is")
	})
	for _, compute := range []string{"fifo", "fair"} {
		type start struct {
			name string
			at   time.Time
		}
		var starts []start
		for _, who := range []string{"alice", "bob"} {
			n := map[string]int{"alice": 12, "bob": 3}[who]
			for i := range n {
				name := fmt.Sprintf("%s-%s-%d", compute, who, i)
				if who == "alice" {
					name = fmt.Sprintf("%s-alice-%02d", compute, i)
				}
				j := s.waitJob(name, api.JobCompleted, 120*time.Second)
				if g := j.Properties.FairShareGroup; compute == "fair" && (g == nil || *g != who) {
					t.Errorf("%s: group %v, want %s", name, g, who)
				}
				starts = append(starts, start{name, *j.Properties.Attempts[0].Assigned})
			}
		}
		slices.SortStableFunc(starts, func(a, b start) int { return a.at.Compare(b.at) })
		var order []string
		for _, st := range starts {
			order = append(order, st.name)
		}
		first := slices.IndexFunc(order, func(n string) bool { return strings.Contains(n, "-bob-") })
		t.Logf("%s: bob's first job started %dth: %v", compute, first+1, order)
		switch {
		case compute == "fifo" && first != 12:
			t.Errorf("FIFO: bob's first job started %dth, want after alice's 12", first+1)
		case compute == "fair" && first > 3:
			t.Errorf("fair share: bob's first job started %dth, want within alice's next few", first+1)
		}
	}
	q, err := s.c.GetQueue(bctx, "fair", 0)
	if err != nil || q.Policy.Kind != api.QueuePolicyFairShare || len(q.Jobs) != 0 {
		t.Errorf("queue of the drained compute: %+v %v", q, err)
	}
}

// resumable counts its attempts in $CUMULUS_CHECKPOINT_DIR/n and, on its
// first attempt, says "checkpoint saved" and runs 15 s more.
const resumable = `n=$(cat "$CUMULUS_CHECKPOINT_DIR/n" 2>/dev/null || echo 0); echo "attempt=$CUMULUS_ATTEMPT found=$n"; echo $((n+1)) > "$CUMULUS_CHECKPOINT_DIR/n"; if [ "$CUMULUS_ATTEMPT" = 1 ]; then echo "checkpoint saved"; sleep 15; fi`

// Alice's two jobs hold both nodes of a fair-share cluster with preemption
// when bob's job arrives: the first of them to have run its minimum
// runtime is preempted (alice's share is 1 of the 2 nodes, as is bob's).
// It saves its checkpoint in the grace period, bob's job runs on its node,
// and it resumes from its checkpoint afterwards; alice's other job runs on
// undisturbed. The preemption is an event with its reason.
func TestFairSharePreemptionResumesFromCheckpoint(t *testing.T) {
	s := startServer(t)
	alice, bob := s.principal("alice"), s.principal("bob")
	s.createQueued("shared", 2, &api.QueuePolicy{Kind: api.QueuePolicyFairShare, Preemption: api.PreemptOverShare, MinRuntime: "PT3S"}, "PT5S")
	submitAs(t, alice, "first", "shared", resumable)
	submitAs(t, alice, "second", "shared", resumable)
	for _, j := range []string{"first", "second"} {
		waitFor(t, j+" running", 60*time.Second, func() bool { return s.job(j).Properties.Status == api.JobRunning })
		s.checkpointed(j)
	}
	nodes := map[string]string{"first": s.nodeOf("first", 0), "second": s.nodeOf("second", 0)}
	submitAs(t, bob, "short", "shared", "echo bob was here")
	b := s.waitJob("short", api.JobCompleted, 60*time.Second)
	attempts := map[string][]api.Attempt{}
	for _, name := range []string{"first", "second"} {
		attempts[name] = s.waitJob(name, api.JobCompleted, 90*time.Second).Properties.Attempts
	}
	victim, other := "first", "second"
	if len(attempts["second"]) > 1 {
		victim, other = "second", "first"
	}
	at := attempts[victim]
	if len(at) != 2 || !strings.HasPrefix(at[0].Reason, "preempted for fair share: alice is over its share (2 of 1 nodes) and job short of bob") {
		t.Fatalf("%s's attempts %+v, want the first preempted for fair share", victim, at)
	}
	if len(attempts[other]) != 1 {
		t.Errorf("%s ran %d attempts, want 1: one preemption frees enough", other, len(attempts[other]))
	}
	if ba := b.Properties.Attempts; len(ba) != 1 || ba[0].Nodes[0] != nodes[victim] {
		t.Errorf("bob's job ran on %+v, want %s's node %s", ba, victim, nodes[victim])
	}
	if log := s.jobLog(victim); !strings.Contains(log, "attempt=2 found=1") {
		t.Fatalf("attempt 2 log %q, want it to find attempt 1's checkpoint", log)
	}
	evs, err := s.c.ComputeEvents(bctx, "shared", client.EventQuery{Types: []string{api.EventJobPreempted}})
	if err != nil || len(evs) != 1 || evs[0].Reason != api.PreemptOverShare || !strings.Contains(evs[0].Message, victim+": preempted for fair share") {
		t.Errorf("preemption events %+v %v", evs, err)
	}
}
