package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// These tests run writers side by side. On SQLite they queue for the one
// writer; on PostgreSQL (CUMULUS_TEST_STORE=postgres) they really run at
// once, and the store must still never give a node to two jobs, lose an
// update or hand out a sequence number twice.

// TestParallelClaimsNeverShareANode: 8 writers each try to claim pairs of
// the same 24 idle nodes for their own jobs; every node ends with at most
// one job, and every claim that succeeded holds both its nodes.
func TestParallelClaimsNeverShareANode(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const nodes, writers = 24, 8
	for i := range nodes {
		n := Node{ID: fmt.Sprintf("n%02d", i), Compute: "/c", State: api.NodeIdle, Created: time.Unix(int64(i), 0)}
		if err := PutNode(ctx, db.W(), n); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	won := map[string][]string{} // job → the nodes its claim got
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range nodes / 2 {
				// Writers walk the pairs from different starting points.
				pair := (k + w*3) % (nodes / 2)
				ids := []string{fmt.Sprintf("n%02d", 2*pair), fmt.Sprintf("n%02d", 2*pair+1)}
				job := fmt.Sprintf("w%d-j%d", w, k)
				ok, err := claimInTx(db, ids, job)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					won[job] = ids
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	all, err := AllNodes(ctx, db.Q())
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, n := range all {
		if n.State != api.NodeRunning || n.JobID == "" {
			t.Errorf("node %s: state %s job %q, want every node claimed", n.ID, n.State, n.JobID)
		}
		owner[n.ID] = n.JobID
	}
	if len(won) != nodes/2 {
		t.Errorf("%d claims succeeded, want %d (one per pair)", len(won), nodes/2)
	}
	for job, ids := range won {
		for _, id := range ids {
			if owner[id] != job {
				t.Errorf("job %s's claim succeeded but node %s runs %q", job, id, owner[id])
			}
		}
	}
	counts, err := NodeCounts(ctx, db.Q(), "/c")
	if err != nil {
		t.Fatal(err)
	}
	if counts[api.NodeRunning] != nodes || counts[api.NodeIdle] != 0 {
		t.Errorf("node counts %v, want %d running", counts, nodes)
	}
}

// TestParallelUpdatesLoseNothing: 8 writers each bump one job's attempt
// counter 25 times by read-modify-write with the version check, trying
// again on a mismatch; the job ends at 200.
func TestParallelUpdatesLoseNothing(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	j := queuedJob("u1", "j1", 1, 0, "", "")
	if err := InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	const writers, bumps = 8, 25
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range bumps {
				for {
					err := db.Tx(ctx, func(q Querier) error {
						cur, err := GetJobByUID(ctx, q, "u1")
						if err != nil {
							return err
						}
						cur.Attempt++
						return UpdateJob(ctx, q, &cur)
					})
					if errors.Is(err, ErrETagMismatch) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	got, err := GetJobByUID(ctx, db.Q(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempt != writers*bumps || got.Version != writers*bumps+1 {
		t.Errorf("attempt %d version %d, want %d and %d", got.Attempt, got.Version, writers*bumps, writers*bumps+1)
	}
}

// TestParallelSubmitsGetDistinctSequences: 200 jobs submitted by 8 writers
// at once get 200 different sequence numbers, and the job counts say 200.
func TestParallelSubmitsGetDistinctSequences(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				j := queuedJob(fmt.Sprintf("u%d-%d", w, k), fmt.Sprintf("j%d-%d", w, k), 1, 0, "", "")
				if err := db.Tx(ctx, func(q Querier) error { return InsertJob(ctx, q, j) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	jobs, err := JobsByStatus(ctx, db.Q(), "/c", api.JobQueued)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for _, j := range jobs {
		if other, dup := seen[j.Seq]; dup {
			t.Errorf("jobs %s and %s share sequence %d", other, j.UID, j.Seq)
		}
		seen[j.Seq] = j.UID
	}
	if len(jobs) != writers*each {
		t.Errorf("%d jobs stored, want %d", len(jobs), writers*each)
	}
	n, err := CountJobs(ctx, db.Q(), "/c", api.JobQueued)
	if err != nil || n != writers*each {
		t.Errorf("CountJobs = %d, %v; want %d", n, err, writers*each)
	}
	counts, err := AllJobCounts(ctx, db.Q())
	if err != nil || len(counts) != 1 || counts[0].N != writers*each {
		t.Errorf("job counts %v, %v; want one row of %d", counts, err, writers*each)
	}
	if err := db.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if counts, err := AllJobCounts(ctx, db.Q()); err != nil || len(counts) != 1 || counts[0].N != writers*each {
		t.Errorf("job counts after compaction %v, %v; want one row of %d", counts, err, writers*each)
	}
}

// TestLeaseFencesOutTheOldHolder: a holder whose lease expired and was
// taken by another can no longer write through its fenced store, not even
// a single write; the new holder can, with the next token.
func TestLeaseFencesOutTheOldHolder(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	a, ok, err := db.AcquireLease(ctx, "controllers", "a", t0, 10*time.Second)
	if err != nil || !ok || a.Token != 1 {
		t.Fatalf("a acquires: %+v %v %v", a, ok, err)
	}
	if _, ok, err := db.AcquireLease(ctx, "controllers", "b", t0.Add(5*time.Second), 10*time.Second); err != nil || ok {
		t.Fatalf("b acquired a running lease: ok %v err %v", ok, err)
	}
	if r, ok, err := db.AcquireLease(ctx, "controllers", "a", t0.Add(5*time.Second), 10*time.Second); err != nil || !ok || r.Token != 1 {
		t.Fatalf("a renews: %+v %v %v", r, ok, err)
	}
	fa := db.Fenced(Fence{Lease: "controllers", Holder: "a", Token: a.Token})
	if err := PutSecret(ctx, fa.W(), "k", []byte("by a")); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	// a pauses past its lease; b takes over.
	b, ok, err := db.AcquireLease(ctx, "controllers", "b", t0.Add(16*time.Second), 10*time.Second)
	if err != nil || !ok || b.Token != 2 {
		t.Fatalf("b takes over: %+v %v %v", b, ok, err)
	}
	if err := PutSecret(ctx, fa.W(), "k", []byte("late a")); !errors.Is(err, ErrFenced) {
		t.Errorf("the old holder's single write: %v, want ErrFenced", err)
	}
	err = fa.Tx(ctx, func(q Querier) error { return PutSecret(ctx, q, "k", []byte("late a")) })
	if !errors.Is(err, ErrFenced) {
		t.Errorf("the old holder's transaction: %v, want ErrFenced", err)
	}
	fb := db.Fenced(Fence{Lease: "controllers", Holder: "b", Token: b.Token})
	if err := PutSecret(ctx, fb.W(), "k", []byte("by b")); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	got, err := GetSecret(ctx, db.Q(), "k")
	if err != nil || string(got) != "by b" {
		t.Errorf("secret = %q, %v; want the new holder's", got, err)
	}
	// b shuts down cleanly: a may take over at once.
	if err := db.ReleaseLease(ctx, "controllers", "b", b.Token); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := db.AcquireLease(ctx, "controllers", "a", t0.Add(17*time.Second), 10*time.Second); err != nil || !ok || c.Token != 3 {
		t.Errorf("a after b released: %+v %v %v", c, ok, err)
	}
}

// TestHeartbeatsKeepTheLatest: heartbeats recorded by several replicas
// keep each node's latest time.
func TestHeartbeatsKeepTheLatest(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_000_000)
	if err := db.PutHeartbeats(ctx, map[string]time.Time{"n1": t0.Add(time.Second), "n2": t0}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutHeartbeats(ctx, map[string]time.Time{"n1": t0, "n2": t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	got, err := db.HeartbeatsSince(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !got["n1"].Equal(t0.Add(time.Second)) || !got["n2"].Equal(t0.Add(2*time.Second)) {
		t.Errorf("heartbeats %v", got)
	}
	if err := db.DeleteHeartbeatsBefore(ctx, t0.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.HeartbeatsSince(ctx, time.UnixMilli(0)); len(got) != 1 {
		t.Errorf("after cleanup %v, want n2 only", got)
	}
}

// TestFencedWritesAreObserved: the leader's single writes (through a
// fenced store's W) reach the metrics as any write does.
func TestFencedWritesAreObserved(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	obs := &recordingObserver{}
	db.SetObserver(obs)
	l, ok, err := db.AcquireLease(ctx, "controllers", "a", time.Unix(1000, 0), time.Hour)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	f := db.Fenced(Fence{Lease: "controllers", Holder: "a", Token: l.Token})
	n := Node{ID: "n1", Compute: "/c", State: api.NodeIdle, Created: time.Unix(1, 0)}
	if err := PutNode(ctx, f.W(), n); err != nil {
		t.Fatal(err)
	}
	n.State, n.Reason = api.NodeUnusable, "heartbeat lost"
	if err := PutNode(ctx, f.W(), n); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.nodes) != 2 || obs.nodes[1].From != api.NodeIdle || obs.nodes[1].To != api.NodeUnusable {
		t.Errorf("node transitions %+v, want idle → unusable last", obs.nodes)
	}
}

// A claim of one node gets it only while it is idle and free: a busy
// node, one not ready, or one that is not there is refused (false, no
// error) and left as it was; of writers racing for the same nodes one at
// a time, exactly one gets each.
func TestClaimsOfOneNode(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	for i, state := range []string{api.NodeIdle, api.NodePreparing} {
		if err := PutNode(ctx, db.W(), Node{ID: fmt.Sprintf("m%d", i), Compute: "/c", State: state, Created: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id, job string) bool {
		t.Helper()
		ok, err := claimInTx(db, []string{id}, job)
		if err != nil {
			t.Fatalf("claim of %s: %v", id, err)
		}
		return ok
	}
	if !claim("m0", "j1") {
		t.Fatal("an idle node's claim was refused")
	}
	for _, id := range []string{"m0", "m1", "nope"} {
		if claim(id, "j2") {
			t.Errorf("node %s was claimed, want refused", id)
		}
	}
	for id, want := range map[string]string{"m0": "j1", "m1": ""} {
		if n, err := GetNode(ctx, db.Q(), id); err != nil || n.JobID != want {
			t.Errorf("node %s runs %q (%v), want %q", id, n.JobID, err, want)
		}
	}

	const nodes, writers = 16, 6
	for i := range nodes {
		if err := PutNode(ctx, db.W(), Node{ID: fmt.Sprintf("s%02d", i), Compute: "/s", State: api.NodeIdle, Created: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range nodes {
				id := fmt.Sprintf("s%02d", (k+w*5)%nodes)
				ok, err := claimInTx(db, []string{id}, fmt.Sprintf("w%d", w))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					got[id]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i := range nodes {
		if id := fmt.Sprintf("s%02d", i); got[id] != 1 {
			t.Errorf("node %s was claimed %d times, want once", id, got[id])
		}
	}
}

// claimInTx claims nodes ids for job in a transaction of its own.
func claimInTx(db *DB, ids []string, job string) (ok bool, err error) {
	ctx := context.Background()
	err = db.Tx(ctx, func(q Querier) (err error) {
		ok, err = ClaimIdleNodes(ctx, q, ids, job)
		return err
	})
	return ok, err
}
