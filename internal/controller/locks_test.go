package controller

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Locks refuse people's requests, never the control plane's own work: a
// compute under a ReadOnly lock, in a workspace under a CanNotDelete
// lock, still grows from 0 to 2 nodes for its jobs, replaces a lost node
// and shrinks back to 0 when they are done.
func TestLockedComputeStillScales(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 2, "PT5S")
	for _, l := range []struct{ scope, level string }{{c.ID, api.LockReadOnly}, {h.sc.WorkspaceID(), api.LockCanNotDelete}} {
		err := h.db.Tx(h.ctx, func(q store.Querier) error {
			_, err := store.PutLock(h.ctx, q, l.scope, api.Lock{ID: api.LockID(l.scope, "l"), Name: "l", Type: api.TypeLock,
				Properties: api.LockProperties{Level: l.level}}, h.clk.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	jobs := []string{h.submit(c, 1), h.submit(c, 1)}
	h.pass()
	if got := h.counts(c)[api.NodePreparing]; got != 2 {
		t.Fatalf("preparing nodes under a ReadOnly lock = %d, want 2", got)
	}
	h.register(c)
	h.pass()
	for _, j := range jobs {
		if st := h.job(j).Doc.Properties.Status; st != api.JobPreparing {
			t.Fatalf("job %s is %s, want Preparing (assigned)", j, st)
		}
	}

	// A node that stops heartbeating is replaced.
	lost := h.nodes(c)[0].ID
	h.clk.Step(30 * time.Second)
	for _, n := range h.nodes(c) {
		if n.ID != lost {
			h.c.Hub.Seen(n.ID, h.clk.Now())
		}
	}
	h.clk.Step(31 * time.Second)
	h.c.Hub.Seen(h.nodes(c)[1].ID, h.clk.Now())
	h.pass()
	h.pass()
	var replaced bool
	for _, n := range h.nodes(c) {
		if n.ID == lost {
			t.Fatalf("lost node %s still there: %+v", lost, h.nodes(c))
		}
		replaced = replaced || n.State == api.NodePreparing
	}
	if !replaced {
		t.Fatalf("nodes = %+v, want a preparing replacement for %s", h.nodes(c), lost)
	}
	h.register(c)
	h.pass()
	for _, j := range jobs {
		h.finish(j, 0)
		if st := h.job(j).Doc.Properties.Status; st != api.JobCompleted {
			t.Fatalf("job %s is %s, want Completed", j, st)
		}
	}

	h.clk.Step(5 * time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 0 {
		t.Fatalf("nodes after the idle timeout under a ReadOnly lock = %d, want 0", got)
	}
	if a := h.storedCompute(c).Aml(); a.TargetNodeCount != 0 {
		t.Errorf("target = %d, want 0", a.TargetNodeCount)
	}
	if ls, err := store.LocksAround(h.ctx, h.db.Q(), c.ID, false); err != nil || len(ls) != 2 {
		t.Errorf("locks after scaling: %d %v, want both still there", len(ls), err)
	}
}
