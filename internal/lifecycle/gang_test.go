package lifecycle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// partEnded reports a node's part of the job's current attempt ended, as
// the agent reports it (an MPI part says which one it was).
func (w *world) partEnded(uid string, e lifecycle.Part, maxAttempts int, now time.Time) {
	w.t.Helper()
	w.must(func(q store.Querier) error {
		j := w.job(uid)
		e.Attempt = j.Attempt
		return lifecycle.PartEnded(w.ctx, q, j, e, maxAttempts, now)
	})
}

// A gang holds its nodes until the job ends: a rank that ended leaves its
// node running the job (not idle for others, not scaled down) until the
// last rank ends; then every node is idle from the job's end.
func TestGangHoldsItsNodesUntilTheJobEnds(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 3)
	w.exited("j", nodes[1], 0, "", at(10))
	w.exited("j", nodes[2], 0, "", at(11))
	wantJob(t, w.job("j"), api.JobRunning, "")
	for _, id := range nodes {
		wantNode(t, w.getNode(id), api.NodeRunning, "j")
	}
	w.exited("j", nodes[0], 0, "", at(20))
	wantJob(t, w.job("j"), api.JobCompleted, "")
	for _, id := range nodes {
		n := w.getNode(id)
		wantNode(t, n, api.NodeIdle, "")
		if !n.IdleSince.Equal(at(20)) {
			t.Errorf("node %s idle since %v; want the job's end %v", id, n.IdleSince, at(20))
		}
	}
}

// However the job ends early — a rank fails, a node is lost, a cancel —
// the nodes whose ranks had ended are freed with it; the nodes whose
// ranks still run keep the job until their agents report them stopped.
func TestGangFreesEndedRanksWhenTheJobEndsEarly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(w *world, nodes []string)
		status string
	}{
		{"another rank fails", func(w *world, nodes []string) { w.exited("j", nodes[2], 1, "", at(12)) }, api.JobFailed},
		{"another rank's node is lost", func(w *world, nodes []string) { w.lost(nodes[2], "no heartbeat", 3, at(12)) }, api.JobQueued},
		{"the job is canceled", func(w *world, nodes []string) {
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(12)) })
			w.exited("j", nodes[2], 143, "canceled", at(13))
		}, api.JobCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			_, nodes := w.running("j", 3)
			w.exited("j", nodes[1], 0, "", at(10))
			tc.end(w, nodes)
			if got := w.job("j").Doc.Properties.Status; got != tc.status {
				t.Fatalf("job %s; want %s", got, tc.status)
			}
			wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
			wantNode(t, w.getNode(nodes[0]), api.NodeRunning, "j") // told to stop at its next poll
		})
	}
}

// An MPI launch: node 0's mpirun ending with 0 decides the job; the
// launchers on the other nodes are then told to stop (Instructions), and
// how they stop does not fail the job.
func TestMPIRunEndDecidesTheJob(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 3)
	w.partEnded("j", lifecycle.Part{Node: nodes[0], Code: 0, Mpirun: true}, 3, at(10))
	j := w.job("j")
	wantJob(t, j, api.JobRunning, "")
	if !j.MPIDone {
		t.Fatal("mpirun's end is not recorded")
	}
	wantNode(t, w.getNode(nodes[0]), api.NodeRunning, "j")
	w.partEnded("j", lifecycle.Part{Node: nodes[1], Code: 0, Launcher: true, Reason: "the job's mpirun ended"}, 3, at(11))
	w.partEnded("j", lifecycle.Part{Node: nodes[2], Code: 143, Launcher: true, Reason: "the job's mpirun ended"}, 3, at(11))
	wantJob(t, w.job("j"), api.JobCompleted, "")
	for _, id := range nodes {
		wantNode(t, w.getNode(id), api.NodeIdle, "")
	}
}

// An MPI launcher that ends with 0 while node 0's mpirun still runs has
// left mpirun without that node: the attempt ends at once with the reason
// (not after mpirun's own timeouts, if any) and the job is queued again,
// until its attempts are used up. A launcher that fails fails the job.
func TestMPILauncherEndingEarlyBreaksTheAttempt(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.partEnded("j", lifecycle.Part{Node: nodes[1], Code: 0, Launcher: true}, 2, at(10))
	j := w.job("j")
	want := fmt.Sprintf("node rank 1 (node %s): its MPI launcher ended (exit code 0) while node rank 0's mpirun still ran; mpirun cannot finish without that node", nodes[1])
	wantJob(t, j, api.JobQueued, want+"; queued again")
	if a := lastAttempt(t, j); a.Ended == nil || !a.Ended.Equal(at(10)) || a.Reason != want {
		t.Errorf("attempt = %+v; want ended at %v with the reason", a, at(10))
	}
	wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
	wantNode(t, w.getNode(nodes[0]), api.NodeRunning, "j") // mpirun is stopped at its next poll

	// The second attempt breaks the same way: with 2 attempts allowed, it fails.
	w.exited("j", nodes[0], 143, "the job no longer runs on this node", at(11))
	fresh := w.idleNodes("m", 2)
	w.assign("j", fresh, at(12))
	w.started("j", at(13))
	w.partEnded("j", lifecycle.Part{Node: fresh[1], Code: 0, Launcher: true}, 2, at(14))
	wantJob(t, w.job("j"), api.JobFailed, fmt.Sprintf("node rank 1 (node %s): its MPI launcher ended (exit code 0) while node rank 0's mpirun still ran; mpirun cannot finish without that node; gave up after 2 attempts", fresh[1]))

	t.Run("a launcher that fails", func(t *testing.T) {
		w := newWorld(t)
		_, nodes := w.running("j", 2)
		w.partEnded("j", lifecycle.Part{Node: nodes[1], Code: 255, Launcher: true}, 3, at(10))
		wantJob(t, w.job("j"), api.JobFailed, fmt.Sprintf("exit code 255 on node %s (node rank 1 of 2)", nodes[1]))
	})
}

// A port in use on a node restarts the job on other ports without using
// a failure retry; a node whose ports keep being taken fails the job after
// MaxPortRetries restarts.
func TestPortBusyStartsTheJobAgain(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	busy := func(node string, now time.Time) {
		w.must(func(q store.Querier) error {
			j := w.job("j")
			return lifecycle.PortBusy(w.ctx, q, j, node, j.Attempt, 20130, now)
		})
	}
	busy(nodes[1], at(10))
	want := fmt.Sprintf("port 20130 was in use on node %s (node rank 1 of 2)", nodes[1])
	j := w.job("j")
	wantJob(t, j, api.JobQueued, want+"; started again on other ports; queued again")
	if j.PortRetries != 1 {
		t.Errorf("port retries = %d; want 1", j.PortRetries)
	}
	wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
	w.exited("j", nodes[0], 143, "", at(11))

	// Restarts on busy ports do not count as attempts: a node failure
	// after them still has its retries (3 attempts allowed).
	for i := range lifecycle.MaxPortRetries - 1 {
		w.assign("j", nodes, at(20+i))
		w.started("j", at(20+i))
		busy(nodes[0], at(20+i))
		w.exited("j", nodes[1], 143, "", at(20+i))
	}
	w.assign("j", nodes, at(30))
	w.started("j", at(30))
	w.lost(nodes[0], "no heartbeat", 3, at(31))
	if got := w.job("j"); got.Doc.Properties.Status != api.JobQueued {
		t.Fatalf("after %d port restarts and one lost node the job is %s %q; want queued again", lifecycle.MaxPortRetries, got.Doc.Properties.Status, got.Doc.Properties.StatusMessage)
	}

	fresh := w.idleNodes("m", 2)
	w.exited("j", nodes[1], 143, "", at(32))
	w.assign("j", fresh, at(33))
	w.started("j", at(33))
	busy(fresh[1], at(34))
	wantJob(t, w.job("j"), api.JobFailed, fmt.Sprintf("port 20130 was in use on node %s (node rank 1 of 2); ports were in use %d times, giving up", fresh[1], lifecycle.MaxPortRetries+1))
	for _, id := range fresh {
		if n := w.getNode(id); n.ID == fresh[1] {
			wantNode(t, n, api.NodeIdle, "")
		}
	}
}
