package lifecycle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// t0 is the time every test starts at; transitions happen at t0 plus a
// few minutes, passed in as now (no clock, no sleeps).
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

const compute = "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/w/computes/c"

// world is a real store (SQLite in a temporary folder) holding the jobs
// and nodes of one compute. Every transition runs in a transaction, as
// the API and the cluster controller run them.
type world struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "lifecycle.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &world{t: t, ctx: ctx, db: db}
}

// do runs fn in one store transaction (rolled back when fn fails).
func (w *world) do(fn func(q store.Querier) error) error {
	return w.db.Tx(w.ctx, fn)
}

// queued submits a job that needs the given number of nodes.
func (w *world) queued(uid string, nodes int) store.Job {
	w.t.Helper()
	j := store.Job{UID: uid, Parent: "/ws", Compute: compute, Created: t0}
	j.Doc.Name = uid
	j.Doc.Properties.JobType = api.JobTypeCommand
	j.Doc.SetStatus(api.JobQueued, t0, "")
	if nodes > 1 {
		j.Doc.Properties.Resources = &api.JobResources{InstanceCount: int32(nodes)}
	}
	if err := store.InsertJob(w.ctx, w.db.W(), &j); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// node records a node in a state, running job uid when uid is not empty.
func (w *world) node(id, state, uid string) store.Node {
	w.t.Helper()
	n := store.Node{ID: id, Compute: compute, State: state, JobID: uid, Priority: api.PriorityDedicated,
		VMSize: "Standard_D2s_v3", Provider: "local", Created: t0, IdleSince: t0}
	if err := store.PutNode(w.ctx, w.db.W(), n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// idleNodes records n idle nodes named prefix-1, prefix-2, ….
func (w *world) idleNodes(prefix string, n int) []string {
	w.t.Helper()
	var ids []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		w.node(id, api.NodeIdle, "")
		ids = append(ids, id)
	}
	return ids
}

func (w *world) job(uid string) store.Job {
	w.t.Helper()
	j, err := store.GetJobByUID(w.ctx, w.db.Q(), uid)
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

func (w *world) getNode(id string) store.Node {
	w.t.Helper()
	n, err := store.GetNode(w.ctx, w.db.Q(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// assign starts the job's next attempt on the nodes, which must work.
func (w *world) assign(uid string, nodes []string, now time.Time) store.Job {
	w.t.Helper()
	var j store.Job
	err := w.do(func(q store.Querier) (err error) {
		j, err = lifecycle.Assign(w.ctx, q, uid, nodes, now)
		return err
	})
	if err != nil {
		w.t.Fatalf("assign %s to %v: %v", uid, nodes, err)
	}
	return j
}

// started reports every node of the job's current attempt running.
func (w *world) started(uid string, now time.Time) store.Job {
	w.t.Helper()
	for _, n := range w.job(uid).Nodes {
		w.must(func(q store.Querier) error {
			return lifecycle.Started(w.ctx, q, w.job(uid), n, w.job(uid).Attempt, now)
		})
	}
	return w.job(uid)
}

// running submits a job and runs it on freshly made idle nodes.
func (w *world) running(uid string, nodes int) (store.Job, []string) {
	w.t.Helper()
	w.queued(uid, nodes)
	ids := w.idleNodes(uid+"-node", nodes)
	w.assign(uid, ids, at(1))
	return w.started(uid, at(2)), ids
}

// setStatus forces a job's status, for states no transition here makes
// (Starting, Finalizing) or to test a refusal from every state.
func (w *world) setStatus(uid, status string) store.Job {
	w.t.Helper()
	j := w.job(uid)
	j.Doc.SetStatus(status, at(3), "")
	if err := store.UpdateJob(w.ctx, w.db.W(), &j); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// must runs one transition that must succeed.
func (w *world) must(fn func(q store.Querier) error) {
	w.t.Helper()
	if err := w.do(fn); err != nil {
		w.t.Fatal(err)
	}
}

// exited reports a node's part of the job's current attempt ended.
func (w *world) exited(uid, node string, code int, reason string, now time.Time) {
	w.t.Helper()
	w.must(func(q store.Querier) error {
		j := w.job(uid)
		return lifecycle.Exited(w.ctx, q, j, node, j.Attempt, code, reason, now)
	})
}

// lost reports a node gone while it ran its job (the health check's call).
func (w *world) lost(id, reason string, maxAttempts int, now time.Time) {
	w.t.Helper()
	w.must(func(q store.Querier) error {
		return lifecycle.NodeLost(w.ctx, q, w.getNode(id), api.NodeUnusable, reason, maxAttempts, now)
	})
}

// wantJob checks a job's status and status message.
func wantJob(t *testing.T, j store.Job, status, msg string) {
	t.Helper()
	p := j.Doc.Properties
	if p.Status != status || p.StatusMessage != msg {
		t.Errorf("job %s is %s %q; want %s %q", j.UID, p.Status, p.StatusMessage, status, msg)
	}
}

// wantNode checks a node's state and the job it holds.
func wantNode(t *testing.T, n store.Node, state, uid string) {
	t.Helper()
	if n.State != state || n.JobID != uid {
		t.Errorf("node %s is %s with job %q; want %s with job %q", n.ID, n.State, n.JobID, state, uid)
	}
}

// lastAttempt is the job's current (or last) attempt.
func lastAttempt(t *testing.T, j store.Job) api.Attempt {
	t.Helper()
	a := j.Doc.Properties.Attempts
	if len(a) == 0 {
		t.Fatalf("job %s has no attempts", j.UID)
	}
	return a[len(a)-1]
}

// statusesAfter lists the statuses recorded in the job's history from
// index i on.
func statusesAfter(j store.Job, i int) []string {
	var s []string
	for _, c := range j.Doc.Properties.History[i:] {
		s = append(s, c.Status)
	}
	return s
}
