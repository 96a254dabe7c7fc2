package lifecycle_test

import (
	"time"

	"errors"
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Started moves a Preparing or Starting job to Running and records when
// it started; from any other status the report changes nothing.
func TestStarted(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   string // "" when the report must change nothing
	}{
		{api.JobPreparing, api.JobRunning},
		{api.JobStarting, api.JobRunning},
		{api.JobNotStarted, ""},
		{api.JobQueued, ""},
		{api.JobRunning, ""},
		{api.JobFinalizing, ""},
		{api.JobCancelRequested, ""},
		{api.JobCompleted, ""},
		{api.JobFailed, ""},
		{api.JobCanceled, ""},
	} {
		t.Run(tc.status, func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			w.node("n", api.NodeIdle, "")
			w.assign("j", []string{"n"}, at(1))
			before := w.job("j")
			if tc.status != api.JobPreparing {
				before = w.setStatus("j", tc.status)
			}
			w.must(func(q store.Querier) error { return lifecycle.Started(w.ctx, q, before, "n", 1, at(4)) })
			j := w.job("j")
			if tc.want == "" {
				if j.Version != before.Version || j.Doc.Properties.StartTime != nil {
					t.Errorf("a start reported to a %s job changed it: %s, start time %v", tc.status, j.Doc.Properties.Status, j.Doc.Properties.StartTime)
				}
				return
			}
			wantJob(t, j, tc.want, "")
			if st := j.Doc.Properties.StartTime; st == nil || !st.Equal(at(4)) {
				t.Errorf("start time = %v; want %v", st, at(4))
			}
			if a := lastAttempt(t, j); a.Started == nil || !a.Started.Equal(at(4)) {
				t.Errorf("attempt started = %v; want %v", a.Started, at(4))
			}
		})
	}
}

// A start reported for another attempt, or by a node that is not the
// job's, is ignored.
func TestStartedIgnoresOtherAttemptsAndNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    string
		attempt int
	}{
		{"an older attempt", "n", 0},
		{"a later attempt", "n", 2},
		{"another node", "stranger", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.queued("j", 1)
			w.node("n", api.NodeIdle, "")
			before := w.assign("j", []string{"n"}, at(1))
			w.must(func(q store.Querier) error { return lifecycle.Started(w.ctx, q, before, tc.node, tc.attempt, at(2)) })
			j := w.job("j")
			wantJob(t, j, api.JobPreparing, "")
			if j.Version != before.Version || lastAttempt(t, j).Started != nil {
				t.Errorf("the ignored report changed the job (version %d → %d)", before.Version, j.Version)
			}
		})
	}
}

// The first start of a multi-node job, and of the job's first attempt,
// is the one kept: later reports do not move the start times.
func TestStartedKeepsTheFirstStart(t *testing.T) {
	w := newWorld(t)
	w.queued("j", 2)
	nodes := w.idleNodes("n", 2)
	w.assign("j", nodes, at(1))
	w.must(func(q store.Querier) error { return lifecycle.Started(w.ctx, q, w.job("j"), nodes[1], 1, at(2)) })
	w.must(func(q store.Querier) error { return lifecycle.Started(w.ctx, q, w.job("j"), nodes[0], 1, at(3)) })
	j := w.job("j")
	wantJob(t, j, api.JobRunning, "")
	if a := lastAttempt(t, j); !a.Started.Equal(at(2)) || !j.Doc.Properties.StartTime.Equal(at(2)) {
		t.Errorf("started %v, job start %v; want both %v (the first rank's)", a.Started, j.Doc.Properties.StartTime, at(2))
	}

	// A second attempt has its own start; the job's start stays the first.
	w.lost(nodes[0], "no heartbeat", 3, at(4))
	fresh := w.idleNodes("m", 2)
	w.assign("j", fresh, at(5))
	j = w.started("j", at(6))
	if a := lastAttempt(t, j); !a.Started.Equal(at(6)) || !j.Doc.Properties.StartTime.Equal(at(2)) {
		t.Errorf("second attempt started %v, job start %v; want %v and %v", a.Started, j.Doc.Properties.StartTime, at(6), at(2))
	}
}

// Each transition writes back the job it was given: a copy that changed
// in the store since it was read is refused, not applied over the change.
func TestStaleJobCopyIsRefused(t *testing.T) {
	w := newWorld(t)
	w.queued("j", 1)
	w.node("n", api.NodeIdle, "")
	stale := w.assign("j", []string{"n"}, at(1))
	w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(2)) })
	err := w.do(func(q store.Querier) error { return lifecycle.Started(w.ctx, q, stale, "n", 1, at(3)) })
	if !errors.Is(err, store.ErrETagMismatch) {
		t.Fatalf("Started with a stale copy = %v; want store.ErrETagMismatch", err)
	}
	wantJob(t, w.job("j"), api.JobCancelRequested, "")
}

// A job's end: completed when every rank exits 0, failed as soon as one
// rank fails, with the message a user reads.
func TestExitedEndsTheJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   int
		exits   []int // exit codes, by rank, in report order
		reason  string
		status  string
		msg     string
		attempt int // the attempt's recorded exit code
	}{
		{name: "one node succeeds", nodes: 1, exits: []int{0}, status: api.JobCompleted},
		{name: "one node fails", nodes: 1, exits: []int{3}, status: api.JobFailed,
			msg: "exit code 3 on node j-node-1", attempt: 3},
		{name: "a failure with the agent's reason", nodes: 1, exits: []int{143}, reason: "timeout: the job ran longer than 1h",
			status: api.JobFailed, msg: "timeout: the job ran longer than 1h (exit code 143 on node j-node-1)", attempt: 143},
		{name: "every rank succeeds", nodes: 3, exits: []int{0, 0, 0}, status: api.JobCompleted},
		{name: "the last rank fails", nodes: 3, exits: []int{0, 0, 1}, status: api.JobFailed,
			msg: "exit code 1 on node j-node-3 (node rank 2 of 3)", attempt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			_, nodes := w.running("j", tc.nodes)
			for i, code := range tc.exits {
				if got := w.job("j").Doc.Properties.Status; got != api.JobRunning {
					t.Fatalf("before rank %d reported, the job is %s; want Running", i, got)
				}
				w.exited("j", nodes[i], code, tc.reason, at(10+i))
				if i < len(tc.exits)-1 {
					// A gang holds its nodes: the rank ended, the node stays the job's.
					wantNode(t, w.getNode(nodes[i]), api.NodeRunning, "j")
				}
			}
			j := w.job("j")
			end := at(10 + len(tc.exits) - 1)
			for _, id := range nodes {
				wantNode(t, w.getNode(id), api.NodeIdle, "")
				if n := w.getNode(id); !n.IdleSince.Equal(end) {
					t.Errorf("node %s idle since %v; want %v (the job's end, which released it)", n.ID, n.IdleSince, end)
				}
			}
			wantJob(t, j, tc.status, tc.msg)
			if et := j.Doc.Properties.EndTime; et == nil || !et.Equal(end) {
				t.Errorf("end time = %v; want %v", et, end)
			}
			a := lastAttempt(t, j)
			if a.Ended == nil || !a.Ended.Equal(end) || a.ExitCode == nil || *a.ExitCode != tc.attempt || a.Reason != tc.msg {
				t.Errorf("attempt = %+v; want ended at %v with exit %d and reason %q", a, end, tc.attempt, tc.msg)
			}
		})
	}
}

// One rank failing ends a multi-node job at once; the other ranks'
// reports that come after change nothing but free their nodes.
func TestExitedFailureEndsTheJobAtOnce(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 3)
	w.exited("j", nodes[1], 2, "", at(10))
	j := w.job("j")
	wantJob(t, j, api.JobFailed, "exit code 2 on node j-node-2 (node rank 1 of 3)")
	wantNode(t, w.getNode(nodes[0]), api.NodeRunning, "j") // stops at its next poll
	wantNode(t, w.getNode(nodes[2]), api.NodeRunning, "j")

	w.exited("j", nodes[0], 143, "canceled", at(11))
	w.exited("j", nodes[2], 0, "", at(12))
	after := w.job("j")
	wantJob(t, after, api.JobFailed, "exit code 2 on node j-node-2 (node rank 1 of 3)")
	if after.Version != j.Version || !after.Doc.Properties.EndTime.Equal(at(10)) {
		t.Errorf("late reports changed the failed job: version %d → %d, end %v", j.Version, after.Version, after.Doc.Properties.EndTime)
	}
	wantNode(t, w.getNode(nodes[0]), api.NodeIdle, "")
	wantNode(t, w.getNode(nodes[2]), api.NodeIdle, "")
}

// A completion is recorded once: a repeated report (an agent retrying an
// event whose answer was lost) neither adds history nor moves the end,
// and the first report of a rank wins over a later different one.
func TestExitedIsRecordedOnce(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.exited("j", nodes[0], 0, "", at(10))
	w.exited("j", nodes[0], 1, "", at(11)) // the same rank again, differently
	j := w.job("j")
	wantJob(t, j, api.JobRunning, "")
	if len(j.Exits) != 1 || j.Exits[nodes[0]] != 0 {
		t.Errorf("exits = %v; want only %s: 0", j.Exits, nodes[0])
	}

	w.exited("j", nodes[1], 0, "", at(12))
	done := w.job("j")
	wantJob(t, done, api.JobCompleted, "")
	w.exited("j", nodes[1], 0, "", at(13))
	w.exited("j", nodes[0], 0, "", at(14))
	again := w.job("j")
	if again.Version != done.Version || len(again.Doc.Properties.History) != len(done.Doc.Properties.History) ||
		!again.Doc.Properties.EndTime.Equal(at(12)) {
		t.Errorf("a repeated report changed the completed job: history %v", statusesAfter(again, 0))
	}
	got := statusesAfter(again, 0)
	if completed := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != api.JobCompleted }); len(completed) != 1 || got[len(got)-1] != api.JobCompleted {
		t.Errorf("history = %v; want one Completed, last", got)
	}
}

// A node's report for an attempt that is over (the job was requeued and
// runs elsewhere now) frees the node but leaves the job alone.
func TestExitedOfAnOldAttempt(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.lost(nodes[0], "no heartbeat", 3, at(5))
	fresh := w.idleNodes("m", 2)
	w.assign("j", fresh, at(6))
	before := w.started("j", at(7))
	wantNode(t, w.getNode(nodes[1]), api.NodeRunning, "j") // attempt 1's other rank, not yet stopped

	w.must(func(q store.Querier) error {
		return lifecycle.Exited(w.ctx, q, w.job("j"), nodes[1], 1, 143, "canceled", at(8))
	})
	j := w.job("j")
	wantJob(t, j, api.JobRunning, "")
	if j.Version != before.Version || len(j.Exits) != 0 {
		t.Errorf("attempt 1's exit changed attempt 2: exits %v", j.Exits)
	}
	wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
	for _, id := range fresh {
		wantNode(t, w.getNode(id), api.NodeRunning, "j")
	}
}

// A late exit of attempt 1 from a node that already holds attempt 2 of the
// same job (a preempted rank's partner, assigned again) leaves attempt 2's
// hold on the node alone: the node is not idle while its rank runs.
func TestExitedOfAnOldAttemptOnANodeOfTheNewOne(t *testing.T) {
	w := newWorld(t)
	_, nodes := w.running("j", 2)
	w.lost(nodes[0], "no heartbeat", 3, at(5))
	w.exited("j", nodes[1], 143, "canceled", at(6)) // attempt 1's survivor stops
	fresh := w.idleNodes("m", 1)
	w.assign("j", []string{nodes[1], fresh[0]}, at(7))
	w.must(func(q store.Querier) error {
		return lifecycle.Exited(w.ctx, q, w.job("j"), nodes[1], 1, 143, "canceled", at(8))
	})
	wantNode(t, w.getNode(nodes[1]), api.NodeRunning, "j")
	w.exited("j", nodes[1], 0, "", at(9))
	w.exited("j", fresh[0], 0, "", at(9))
	wantJob(t, w.job("j"), api.JobCompleted, "")
	wantNode(t, w.getNode(nodes[1]), api.NodeIdle, "")
}

// Releasing a node after its part ended: a running node becomes idle; a
// leaving or unusable one keeps its state and loses the job; a node that
// runs another job, or that is gone, is left alone.
func TestExitedReleasesTheNode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		state     string
		job       string // the node's job, "j" or another
		wantState string
		wantJob   string
	}{
		{"running", api.NodeRunning, "j", api.NodeIdle, ""},
		{"leaving", api.NodeLeaving, "j", api.NodeLeaving, ""},
		{"unusable", api.NodeUnusable, "j", api.NodeUnusable, ""},
		{"running another job", api.NodeRunning, "other", api.NodeRunning, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.running("j", 1)
			n := w.node("j-node-1", tc.state, tc.job)
			w.exited("j", n.ID, 0, "", at(10))
			got := w.getNode(n.ID)
			wantNode(t, got, tc.wantState, tc.wantJob)
			wantIdle := n.IdleSince
			if tc.wantState == api.NodeIdle {
				wantIdle = at(10)
			}
			if !got.IdleSince.Equal(wantIdle) {
				t.Errorf("idle since %v; want %v", got.IdleSince, wantIdle)
			}
			wantJob(t, w.job("j"), api.JobCompleted, "")
		})
	}

	t.Run("gone", func(t *testing.T) {
		w := newWorld(t)
		w.running("j", 1)
		if err := store.DeleteNode(w.ctx, w.db.W(), "j-node-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		w.exited("j", "j-node-1", 0, "", at(10))
		wantJob(t, w.job("j"), api.JobCompleted, "")
	})
}

// A cancel asked of a running job ends it Canceled once its nodes report:
// at the first failing exit (the signal), or when every rank has ended.
func TestExitedAfterCancelRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		exits []int
		after []string // the job's status after each report
	}{
		{"stopped by the signal", []int{143}, []string{api.JobCanceled}},
		{"one rank ended 0, one stopped by the signal", []int{0, 143}, []string{api.JobCancelRequested, api.JobCanceled}},
		{"every rank ended 0", []int{0, 0}, []string{api.JobCancelRequested, api.JobCanceled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			_, nodes := w.running("j", len(tc.exits))
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(5)) })
			for i, code := range tc.exits {
				w.exited("j", nodes[i], code, "canceled", at(10+i))
				if got := w.job("j").Doc.Properties.Status; got != tc.after[i] {
					t.Fatalf("after rank %d exited %d the job is %s; want %s", i, code, got, tc.after[i])
				}
			}
			j := w.job("j")
			wantJob(t, j, api.JobCanceled, "canceled by request")
			if a := lastAttempt(t, j); a.Ended == nil || a.Reason != "canceled" || a.ExitCode == nil || *a.ExitCode != tc.exits[len(tc.exits)-1] {
				t.Errorf("attempt = %+v; want ended, reason canceled, the last exit code", a)
			}
			for _, id := range nodes {
				wantNode(t, w.getNode(id), api.NodeIdle, "")
			}
		})
	}
}

// RequestCancel ends a job that holds no node at once, asks the nodes of
// one that does, and leaves a job that is ending or ended alone.
func TestRequestCancel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(w *world) // leaves job "j" in the state to cancel
		status string         // the status after the request
		msg    string
	}{
		{"not started", func(w *world) { w.queued("j", 1); w.setStatus("j", api.JobNotStarted) },
			api.JobCanceled, "canceled by request before it started"},
		{"queued", func(w *world) { w.queued("j", 1) },
			api.JobCanceled, "canceled by request before it started"},
		{"queued again after its node was lost", func(w *world) {
			_, nodes := w.running("j", 1)
			w.lost(nodes[0], "no heartbeat", 3, at(3))
		}, api.JobCanceled, "canceled by request before it started"},
		{"preparing", func(w *world) {
			w.queued("j", 2)
			w.assign("j", w.idleNodes("n", 2), at(1))
		}, api.JobCancelRequested, ""},
		{"running", func(w *world) { w.running("j", 2) }, api.JobCancelRequested, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			held := w.job("j").Nodes
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, w.job("j"), at(5)) })
			j := w.job("j")
			wantJob(t, j, tc.status, tc.msg)
			ended := j.Doc.Properties.EndTime != nil
			if api.JobTerminal(tc.status) != ended {
				t.Errorf("end time %v for a %s job", j.Doc.Properties.EndTime, tc.status)
			}
			for _, id := range held {
				wantNode(t, w.getNode(id), api.NodeRunning, "j") // they stop at their next poll
			}
		})
	}

	for _, status := range []string{api.JobCancelRequested, api.JobCompleted, api.JobFailed, api.JobCanceled} {
		t.Run("already "+status, func(t *testing.T) {
			w := newWorld(t)
			w.running("j", 1)
			before := w.setStatus("j", status)
			w.must(func(q store.Querier) error { return lifecycle.RequestCancel(w.ctx, q, before, at(5)) })
			if j := w.job("j"); j.Version != before.Version || j.Doc.Properties.Status != status {
				t.Errorf("a cancel request changed a %s job to %s", status, j.Doc.Properties.Status)
			}
		})
	}
}
