package lifecycle_test

import (
	"errors"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// withQueue gives compute "cpu" a queue policy.
func (w *world) withQueue(p *api.QueuePolicy) api.Compute {
	w.t.Helper()
	var out api.Compute
	err := w.do(func(q store.Querier) error {
		d, err := store.Get[api.Compute](w.ctx, q, store.KindCompute, ws.WorkspaceID(), "cpu")
		if err != nil {
			return err
		}
		d.Value.Aml().QueuePolicy = p
		if err := api.ApplyUpdate(&d.Value, &api.ClusterUpdateProperties{QueuePolicy: p}); err != nil {
			return err
		}
		_, err = store.Put(w.ctx, q, store.KindCompute, ws.WorkspaceID(), "cpu", d.Value, d.Version, t0)
		out = d.Value
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func groupOf(j store.Job) string {
	if g := j.Doc.Properties.FairShareGroup; g != nil {
		return *g
	}
	return "<none>"
}

// On a fair-share compute a job is put in its submitter's group, or in
// its tag's; its trials in the sweep's. On a FIFO compute it has none.
func TestSubmitPutsAJobInItsGroup(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	fifo, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "f", Job: commandJob("f", "true", 1), Principal: "alice"})
	if err != nil || groupOf(fifo) != "<none>" {
		t.Fatalf("FIFO: group %s, %v", groupOf(fifo), err)
	}
	w.withQueue(&api.QueuePolicy{Kind: api.QueuePolicyFairShare})
	a, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: commandJob("a", "true", 1), Principal: "alice"})
	if err != nil || groupOf(a) != "alice" {
		t.Fatalf("by principal: group %s, %v", groupOf(a), err)
	}
	w.withQueue(&api.QueuePolicy{Kind: api.QueuePolicyFairShare, FairShareBy: "tag:team"})
	tagged := commandJob("b", "true", 1)
	tagged.Properties.Tags = map[string]string{"team": "vision"}
	b, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "b", Job: tagged, Principal: "alice"})
	if err != nil || groupOf(b) != "vision" || groupOf(w.job(b.UID)) != "vision" {
		t.Fatalf("by tag: group %s, %v", groupOf(b), err)
	}
	// Its tag changes on a re-submission: so does its group.
	tagged.Properties.Tags["team"] = "speech"
	if b, _, err = w.submit(lifecycle.Submission{Workspace: ws, Name: "b", Job: tagged, Principal: "alice"}); err != nil || groupOf(w.job(b.UID)) != "speech" {
		t.Fatalf("re-tagged: group %s, %v", groupOf(w.job(b.UID)), err)
	}
	sweep := sweepJob("s", []any{0.1, 0.2})
	sweep.Properties.Tags = map[string]string{"team": "nlp"}
	parent, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s", Job: sweep, Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	trial := parent.Doc.Trial("s_0", map[string]any{"lr": 0.1})
	if err := api.PrepareJob(&trial, "s_0"); err != nil {
		t.Fatal(err)
	}
	child, _, err := w.submit(lifecycle.Submission{Workspace: ws, Name: "s_0", Job: trial, Parent: &parent})
	if err != nil || groupOf(child) != "nlp" {
		t.Fatalf("trial: group %s, %v", groupOf(child), err)
	}
}

// A change of grouping moves every job that is not finished into its new
// group and forgets the old groups' usage; finished jobs keep theirs.
func TestRegroup(t *testing.T) {
	w := newWorld(t)
	w.withCompute(4, api.StateSucceeded)
	w.withQueue(&api.QueuePolicy{Kind: api.QueuePolicyFairShare})
	tagged := commandJob("a", "true", 1)
	tagged.Properties.Tags = map[string]string{"team": "vision"}
	a, _, _ := w.submit(lifecycle.Submission{Workspace: ws, Name: "a", Job: tagged, Principal: "alice"})
	done, _, _ := w.submit(lifecycle.Submission{Workspace: ws, Name: "d", Job: commandJob("d", "true", 1), Principal: "bob"})
	w.setStatus(done.UID, api.JobCompleted)
	w.must(func(q store.Querier) error {
		return store.PutShareUsage(w.ctx, q, ws.ComputeID("cpu"), "alice", store.ShareUsage{Value: 10, At: t0, Held: 1})
	})
	comp := w.withQueue(&api.QueuePolicy{Kind: api.QueuePolicyFairShare, FairShareBy: "tag:team"})
	if lifecycle.Grouping(&comp) != "tag:team" {
		t.Fatalf("grouping %q", lifecycle.Grouping(&comp))
	}
	var moved int
	w.must(func(q store.Querier) (err error) { moved, err = lifecycle.Regroup(w.ctx, q, comp); return err })
	if moved != 1 || groupOf(w.job(a.UID)) != "vision" || groupOf(w.job(done.UID)) != "bob" {
		t.Errorf("moved %d: a in %s, the finished job in %s", moved, groupOf(w.job(a.UID)), groupOf(w.job(done.UID)))
	}
	if u, _ := store.ShareUsages(w.ctx, w.db.Q(), ws.ComputeID("cpu")); len(u) != 0 {
		t.Errorf("old usage kept: %v", u)
	}
	comp = w.withQueue(&api.QueuePolicy{Kind: api.QueuePolicyFifo})
	w.must(func(q store.Querier) (err error) { moved, err = lifecycle.Regroup(w.ctx, q, comp); return err })
	if groupOf(w.job(a.UID)) != "<none>" {
		t.Errorf("FIFO again: a in %s", groupOf(w.job(a.UID)))
	}
}

// Reclaim stops a running job for another: the attempt ends with the
// reason, the job is queued again without using a retry, and its nodes
// keep it until their agents report it stopped, then are idle. A job that
// no longer runs is stale.
func TestReclaim(t *testing.T) {
	w := newWorld(t)
	j, nodes := w.running("r", 2)
	var got store.Job
	w.must(func(q store.Querier) (err error) {
		got, err = lifecycle.Reclaim(w.ctx, q, "r", "preempted for job b of priority 5 (this job's priority is 0)", at(20))
		return err
	})
	j = w.job("r")
	wantJob(t, j, api.JobQueued, "preempted for job b of priority 5 (this job's priority is 0); queued again")
	if a := lastAttempt(t, j); a.Ended == nil || !a.Ended.Equal(at(20)) || a.Reason != "preempted for job b of priority 5 (this job's priority is 0)" {
		t.Errorf("attempt %+v", a)
	}
	if j.Reclaims != 1 || j.Reclaimed != 1 || got.Reclaimed != 1 || len(j.Nodes) != 0 {
		t.Errorf("reclaims %d, reclaimed attempt %d, nodes %v", j.Reclaims, j.Reclaimed, j.Nodes)
	}
	for _, id := range nodes {
		wantNode(t, w.getNode(id), api.NodeRunning, "r") // until its agent stops it
	}
	// The agents report the attempt ended: the nodes are idle.
	for _, id := range nodes {
		w.must(func(q store.Querier) error {
			return lifecycle.Exited(w.ctx, q, w.job("r"), id, 1, 143, "preempted", at(21))
		})
		wantNode(t, w.getNode(id), api.NodeIdle, "")
	}
	wantJob(t, w.job("r"), api.JobQueued, "preempted for job b of priority 5 (this job's priority is 0); queued again")
	// Stopped this way any number of times, it never fails for it.
	for i := range 5 {
		w.assign("r", nodes, at(30+i*10))
		w.must(func(q store.Querier) (err error) {
			_, err = lifecycle.Reclaim(w.ctx, q, "r", "again", at(35+i*10))
			return err
		})
		for _, id := range nodes {
			w.must(func(q store.Querier) error {
				j := w.job("r")
				return lifecycle.Exited(w.ctx, q, j, id, j.Attempt, 143, "", at(36+i*10))
			})
		}
	}
	if j := w.job("r"); j.Doc.Properties.Status != api.JobQueued || j.Reclaims != 6 {
		t.Errorf("after 6 reclaims: %s, %d", j.Doc.Properties.Status, j.Reclaims)
	}
	// Stale: queued, or finished.
	err := w.do(func(q store.Querier) error { _, err := lifecycle.Reclaim(w.ctx, q, "r", "x", at(99)); return err })
	if !errors.Is(err, lifecycle.ErrStale) {
		t.Errorf("reclaim of a queued job: %v, want ErrStale", err)
	}
}
