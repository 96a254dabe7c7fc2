package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// runGang plays a job of n nodes from submission to Running: passes,
// agents registering, every rank started.
func (h *harness) runGang(c api.Compute, n int32) string {
	h.t.Helper()
	uid := h.submit(c, n)
	h.pass()
	h.register(c)
	h.pass()
	j := h.job(uid)
	if j.Doc.Properties.Status != api.JobPreparing {
		h.t.Fatalf("job %s after two passes; want Preparing", j.Doc.Properties.Status)
	}
	for _, id := range j.Nodes {
		h.tx(func(q store.Querier) error {
			cur, err := store.GetJobByUID(h.ctx, q, uid)
			if err != nil {
				return err
			}
			return lifecycle.Started(h.ctx, q, cur, id, cur.Attempt, h.clk.Now())
		})
	}
	return uid
}

// rankEnded plays one rank's agent reporting its part's end.
func (h *harness) rankEnded(uid string, rank, code int) {
	h.t.Helper()
	h.tx(func(q store.Querier) error {
		j, err := store.GetJobByUID(h.ctx, q, uid)
		if err != nil {
			return err
		}
		return lifecycle.Exited(h.ctx, q, j, j.Nodes[rank], j.Attempt, code, "", h.clk.Now())
	})
}

func (h *harness) tx(fn func(q store.Querier) error) {
	h.t.Helper()
	if err := h.db.Tx(h.ctx, fn); err != nil {
		h.t.Fatal(err)
	}
}

// A node whose rank of a running gang ended is held for the job: past
// the idle time it is neither removed nor given the next job; once the
// job ends it is idle and goes after the idle time.
func TestGangNodeWhoseRankEndedIsHeldUntilTheJobEnds(t *testing.T) {
	h := newHarness(t)
	c := h.compute("gang", 0, 2, "PT5S")
	uid := h.runGang(c, 2)
	held := h.job(uid).Nodes[1]
	h.rankEnded(uid, 1, 0)
	next := h.submit(c, 1)
	for range 5 {
		h.clk.Step(time.Minute) // far past the idle time
		h.heartbeat(c)
		h.pass()
	}
	if j := h.job(uid); j.Doc.Properties.Status != api.JobRunning {
		t.Fatalf("the gang is %s %q; want still Running", j.Doc.Properties.Status, j.Doc.Properties.StatusMessage)
	}
	n, err := store.GetNode(h.ctx, h.db.Q(), held)
	if err != nil {
		t.Fatalf("the node whose rank ended is gone: %v (deleted: %v)", err, h.prov.DeleteCalls)
	}
	if n.State != api.NodeRunning || n.JobID != uid {
		t.Fatalf("the node whose rank ended is %s with job %q; want running the gang", n.State, n.JobID)
	}
	if st := h.job(next).Doc.Properties.Status; st != api.JobQueued {
		t.Fatalf("the next job is %s; want Queued (the cluster's 2 nodes are the gang's)", st)
	}

	h.rankEnded(uid, 0, 0)
	if j := h.job(uid); j.Doc.Properties.Status != api.JobCompleted {
		t.Fatalf("the gang is %s after its last rank; want Completed", j.Doc.Properties.Status)
	}
	h.pass()
	if st := h.job(next).Doc.Properties.Status; st != api.JobPreparing {
		t.Fatalf("the next job is %s once the gang ended; want Preparing on a freed node", st)
	}
}

// A running job whose node disappears from the store (as a node scaled
// away under a running job once did), or is freed, or runs another job,
// has its attempt ended within the heartbeat timeout — not left Running
// forever — with a reason naming the rank, and is queued again; without
// attempts left it fails.
func TestJobThatLostANodeIsRequeued(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(h *harness, n store.Node)
		want    string
	}{
		{"the node's record is gone", func(h *harness, n store.Node) {
			h.tx(func(q store.Querier) error { return store.DeleteNode(h.ctx, q, n.ID, h.clk.Now()) })
		}, "no longer exists"},
		{"the node was freed", func(h *harness, n store.Node) {
			n.State, n.JobID, n.IdleSince = api.NodeIdle, "", h.clk.Now()
			h.tx(func(q store.Querier) error { return store.PutNode(h.ctx, q, n) })
		}, "was freed while the job ran (it is idle)"},
		{"the node runs another job", func(h *harness, n store.Node) {
			n.JobID = "someone-else"
			h.tx(func(q store.Querier) error { return store.PutNode(h.ctx, q, n) })
		}, "runs another job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.c.MaxAttempts = 2
			c := h.compute("gang", 0, 3, "PT10M")
			uid := h.runGang(c, 2)
			for attempt := 1; attempt <= 2; attempt++ {
				j := h.job(uid)
				lost, err := store.GetNode(h.ctx, h.db.Q(), j.Nodes[1])
				if err != nil {
					t.Fatal(err)
				}
				tc.breakIt(h, lost)
				// Passes every Resync, the agents heartbeating: the attempt
				// ends within the heartbeat timeout.
				broke := h.clk.Now()
				for h.job(uid).Doc.Properties.Attempts[attempt-1].Ended == nil {
					if waited := h.clk.Now().Sub(broke); waited > h.c.HeartbeatTimeout {
						t.Fatalf("attempt %d still runs %s after it lost node %s", attempt, waited, lost.ID)
					}
					h.clk.Step(h.c.Resync)
					h.heartbeat(c)
					h.pass()
				}
				j = h.job(uid)
				why := fmt.Sprintf("node rank 1 (node %s) of the job's attempt %s", lost.ID, tc.want)
				a := j.Doc.Properties.Attempts[attempt-1]
				if a.Ended == nil || a.Reason != why {
					t.Fatalf("attempt %d = %+v; want ended with %q", attempt, a, why)
				}
				if attempt == 2 {
					if j.Doc.Properties.Status != api.JobFailed || !strings.HasSuffix(j.Doc.Properties.StatusMessage, "gave up after 2 attempts") {
						t.Fatalf("job %s %q; want Failed after its 2 attempts", j.Doc.Properties.Status, j.Doc.Properties.StatusMessage)
					}
					return
				}
				if j.Doc.Properties.Status != api.JobQueued && j.Doc.Properties.Status != api.JobPreparing {
					t.Fatalf("job %s %q; want queued again", j.Doc.Properties.Status, j.Doc.Properties.StatusMessage)
				}
				// Its other node stops the old attempt; the job runs again.
				h.tx(func(q store.Querier) error {
					cur, err := store.GetJobByUID(h.ctx, q, uid)
					if err != nil {
						return err
					}
					return lifecycle.Exited(h.ctx, q, cur, j.Doc.Properties.Attempts[0].Nodes[0], 1, 143, "", h.clk.Now())
				})
				h.register(c)
				h.pass()
				h.pass()
				j = h.job(uid)
				if j.Attempt != 2 || len(j.Nodes) != 2 {
					t.Fatalf("job %s attempt %d on %v; want its second attempt running", j.Doc.Properties.Status, j.Attempt, j.Nodes)
				}
				for _, id := range j.Nodes {
					h.tx(func(q store.Querier) error {
						cur, err := store.GetJobByUID(h.ctx, q, uid)
						if err != nil {
							return err
						}
						return lifecycle.Started(h.ctx, q, cur, id, cur.Attempt, h.clk.Now())
					})
				}
			}
		})
	}
}
