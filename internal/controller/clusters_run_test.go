package controller

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// TestRunPassesOnNotifyResyncAndWhenAPlanAsks: the loop makes a pass at
// once when notified, one every Resync when nothing notifies it, and one
// when a plan asks to be woken (a node's idle timeout) even though the
// next resync is far off; it returns when its context ends. In a synctest
// bubble, where time is virtual and moves only when every goroutine
// waits: the controller runs on the real clock, which the bubble fakes.
func TestRunPassesOnNotifyResyncAndWhenAPlanAsks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t) // its store, opened in the bubble
		h.c.Clock = clock.Real{}
		h.c.Resync = 10 * time.Minute
		h.c.HeartbeatTimeout = 24 * time.Hour // the test plays no heartbeats
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.c.Run(ctx)
		}()
		synctest.Wait() // the first pass: nothing to do
		// The loop's goroutine calls the provider: read it under its lock.
		calls := func() (created, deleted []string) {
			h.prov.Locked(func() {
				created = append(created, h.prov.Created...)
				deleted = append(deleted, h.prov.DeleteCalls...)
			})
			return created, deleted
		}

		c := h.compute("cpu", 0, 1, "PT60S")
		uid := h.submit(c, 1)
		h.c.Notify()
		synctest.Wait()
		if created, _ := calls(); len(created) != 1 || time.Since(start) != 0 {
			t.Fatalf("after Notify: created %v at +%s; want the node at once", created, time.Since(start))
		}

		// The agent registers; nothing notifies the loop.
		n := h.nodes(c)[0]
		n.State, n.Ready, n.IdleSince = api.NodeIdle, time.Now(), time.Now()
		if err := store.PutNode(h.ctx, h.db.Q(), n); err != nil {
			t.Fatal(err)
		}
		time.Sleep(h.c.Resync - time.Second)
		synctest.Wait()
		if st := h.job(uid).Doc.Properties.Status; st != api.JobQueued {
			t.Fatalf("job %s before the resync, with nothing notified; want Queued", st)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if st := h.job(uid).Doc.Properties.Status; st != api.JobPreparing {
			t.Fatalf("job %s at the resync; want Preparing (assigned)", st)
		}

		// The job ends; the node is idle and due to go 60 s later, long
		// before the next resync.
		if err := h.db.Tx(h.ctx, func(q store.Querier) error {
			j, err := store.GetJobByUID(h.ctx, q, uid)
			if err != nil {
				return err
			}
			return lifecycle.Exited(h.ctx, q, j, n.ID, j.Attempt, 0, "", time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		h.c.Notify()
		synctest.Wait()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if _, deleted := calls(); len(deleted) != 0 {
			t.Fatalf("node deleted %v before its idle time passed", deleted)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, deleted := calls(); len(deleted) != 1 || len(h.nodes(c)) != 0 {
			t.Fatalf("deleted %v, %d nodes left at +%s; want the idle node removed when its idle time passed, not at the next resync",
				deleted, len(h.nodes(c)), time.Since(start))
		}

		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return when its context ended")
		}
	})
}
