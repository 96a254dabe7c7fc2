package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

type recordingObserver struct {
	mu    sync.Mutex
	txs   []bool
	moves []JobTransition
	nodes []NodeTransition
}

func (o *recordingObserver) NodeTransition(t NodeTransition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nodes = append(o.nodes, t)
}

func (o *recordingObserver) TxDone(_ time.Duration, committed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.txs = append(o.txs, committed)
}

func (o *recordingObserver) JobTransition(t JobTransition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.moves = append(o.moves, t)
}

// job_counts follows inserts, status changes and deletes; the observer
// hears of committed status changes only, with the queue time on the
// first start.
func TestJobCountsAndTransitions(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	db.SetObserver(obs)
	a := queuedJob("u1", "a", 1, 0, "", "")
	b := queuedJob("u2", "b", 1, 0, "", "")
	write := func(fn func(q Querier) error) {
		t.Helper()
		if err := db.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []*Job{a, b} {
		write(func(q Querier) error { return InsertJob(ctx, q, j) })
	}
	start := a.Created.Add(90 * time.Second)
	err := db.Tx(ctx, func(q Querier) error {
		j, err := GetJobByUID(ctx, q, "u1")
		if err != nil {
			return err
		}
		j.Attempt = 1
		j.Doc.Properties.StartTime = &start
		j.Doc.Properties.Status = api.JobRunning
		return UpdateJob(ctx, q, &j)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A rolled-back change is not reported.
	errNo := errors.New("no")
	err = db.Tx(ctx, func(q Querier) error {
		j, err := GetJobByUID(ctx, q, "u2")
		if err != nil {
			return err
		}
		j.Doc.Properties.Status = api.JobCanceled
		if err := UpdateJob(ctx, q, &j); err != nil {
			return err
		}
		return errNo
	})
	if !errors.Is(err, errNo) {
		t.Fatal(err)
	}
	// A write that keeps the status is no transition.
	j, err := GetJobByUID(ctx, db.Q(), "u2")
	if err != nil {
		t.Fatal(err)
	}
	j.Doc.Properties.StatusMessage = "waiting"
	write(func(q Querier) error { return UpdateJob(ctx, q, &j) })
	got, err := AllJobCounts(ctx, db.Q())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y StateCount) int { return strings.Compare(x.State, y.State) })
	want := []StateCount{{"/c", api.JobQueued, 1}, {"/c", api.JobRunning, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("AllJobCounts = %+v, want %+v", got, want)
	}
	write(func(q Querier) error { return DeleteJob(ctx, q, "u2") })
	if got, _ := AllJobCounts(ctx, db.Q()); !slices.Equal(got, want[1:]) {
		t.Errorf("after delete: AllJobCounts = %+v, want %+v", got, want[1:])
	}
	wantMoves := []JobTransition{{Compute: "/c", To: api.JobQueued}, {Compute: "/c", To: api.JobQueued},
		{Compute: "/c", From: api.JobQueued, To: api.JobRunning, Queued: 90 * time.Second}}
	if !slices.Equal(obs.moves, wantMoves) {
		t.Errorf("transitions = %+v, want %+v", obs.moves, wantMoves)
	}
	if want := []bool{true, true, true, false, true, true}; !slices.Equal(obs.txs, want) {
		t.Errorf("transactions committed = %v, want %v", obs.txs, want)
	}
}

// A status change is reported from the status the updated version held:
// the one a job was read with (from the store or the cache of decoded
// jobs), then the one its last update wrote; a job made without a read
// has its stored status looked up.
func TestJobTransitionsFromTheVersionUpdated(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	db.SetObserver(obs)
	a, b := queuedJob("u1", "a", 1, 0, "", ""), queuedJob("u2", "b", 1, 0, "", "")
	for _, j := range []*Job{a, b} {
		if err := InsertJob(ctx, db.W(), j); err != nil {
			t.Fatal(err)
		}
	}
	set := func(j *Job, status string) {
		t.Helper()
		j.Doc.Properties.Status = status
		if err := db.Tx(ctx, func(q Querier) error { return UpdateJob(ctx, q, j) }); err != nil {
			t.Fatal(err)
		}
	}
	set(a, api.JobPreparing) // the value inserted
	set(a, api.JobRunning)   // the same value, updated
	cache := NewJobCache()
	for range 2 { // the second read is the cache's
		if _, err := ListJobsCached(ctx, db.Q(), cache, "/ws", "", "", 10); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := ListJobsCached(ctx, db.Q(), cache, "/ws", "", "", 10)
	if err != nil || len(listed) != 2 {
		t.Fatalf("list = %d jobs, %v", len(listed), err)
	}
	i := slices.IndexFunc(listed, func(j Job) bool { return j.UID == "u1" })
	set(&listed[i], api.JobCompleted)
	made := &Job{UID: "u2", Parent: "/ws", Compute: "/c", Version: b.Version, Doc: b.Doc}
	set(made, api.JobCanceled)
	want := []JobTransition{{Compute: "/c", To: api.JobQueued}, {Compute: "/c", To: api.JobQueued},
		{Compute: "/c", From: api.JobQueued, To: api.JobPreparing},
		{Compute: "/c", From: api.JobPreparing, To: api.JobRunning},
		{Compute: "/c", From: api.JobRunning, To: api.JobCompleted},
		{Compute: "/c", From: api.JobQueued, To: api.JobCanceled}}
	if !slices.Equal(obs.moves, want) {
		t.Errorf("transitions = %+v,\nwant %+v", obs.moves, want)
	}
}

// PutNode reports state changes, with the provisioning time when a
// requested node's agent registered; rewrites of the same state are not
// changes.
func TestNodeTransitions(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	db.SetObserver(obs)
	created := time.Unix(100, 0)
	n := Node{ID: "n1", Compute: "/C", State: api.NodePreparing, Created: created}
	if err := PutNode(ctx, db.W(), n); err != nil {
		t.Fatal(err)
	}
	n.Heartbeat = created.Add(time.Second)
	if err := PutNode(ctx, db.W(), n); err != nil {
		t.Fatal(err)
	}
	n.State, n.Ready = api.NodeIdle, created.Add(75*time.Second)
	if err := db.Tx(ctx, func(q Querier) error { return PutNode(ctx, q, n) }); err != nil {
		t.Fatal(err)
	}
	n.State, n.Reason = api.NodePreempted, "evicted"
	if err := PutNode(ctx, db.W(), n); err != nil {
		t.Fatal(err)
	}
	want := []NodeTransition{{Compute: "/C", To: api.NodePreparing},
		{Compute: "/C", From: api.NodePreparing, To: api.NodeIdle, Provisioned: 75 * time.Second},
		{Compute: "/C", From: api.NodeIdle, To: api.NodePreempted, Reason: "evicted"}}
	if !slices.Equal(obs.nodes, want) {
		t.Errorf("node transitions = %+v, want %+v", obs.nodes, want)
	}
	got, err := AllNodeCounts(ctx, db.Q())
	if err != nil || !slices.Equal(got, []StateCount{{"/c", api.NodePreempted, 1}}) {
		t.Errorf("AllNodeCounts = %+v, %v", got, err)
	}
}
