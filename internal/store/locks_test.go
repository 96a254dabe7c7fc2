package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

const (
	lockGroup = "/subscriptions/S/resourceGroups/G"
	lockWS    = lockGroup + "/providers/Microsoft.MachineLearningServices/workspaces/WS"
)

func putTestLock(t *testing.T, db *DB, scope, name, level string) bool {
	t.Helper()
	l := api.Lock{ID: api.LockID(scope, name), Name: name, Type: api.TypeLock, Properties: api.LockProperties{Level: level, Notes: "n"}}
	var created bool
	err := db.Tx(context.Background(), func(q Querier) (err error) {
		created, err = PutLock(context.Background(), q, scope, l, time.Unix(1000, 0))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func lockNames(ls []StoredLock) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Lock.Name)
	}
	return out
}

// Locks are found at a scope and above it (and below when asked), by ids
// in any case, never across a name that merely shares a prefix.
func TestLocksAtAboveAndBelow(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	cpu := lockWS + "/computes/cpu"
	if !putTestLock(t, db, lockWS, "ws-lock", api.LockCanNotDelete) || !putTestLock(t, db, cpu, "cpu-lock", api.LockReadOnly) {
		t.Fatal("a new lock was not reported created")
	}
	putTestLock(t, db, lockWS+"/computes/cpu2", "cpu2-lock", api.LockReadOnly)
	putTestLock(t, db, lockWS+"2", "ws2-lock", api.LockReadOnly)
	if putTestLock(t, db, cpu, "CPU-LOCK", api.LockCanNotDelete) {
		t.Error("replacing a lock (its name in another case) was reported as a creation")
	}

	got, err := LocksAround(ctx, db.Q(), "/SUBSCRIPTIONS/s/resourcegroups/g/providers/microsoft.machinelearningservices/workspaces/ws/computes/CPU", false)
	if err != nil {
		t.Fatal(err)
	}
	if names := lockNames(got); len(names) != 2 || names[0] != "ws-lock" || names[1] != "CPU-LOCK" {
		t.Fatalf("locks above and at the compute: %v, want [ws-lock CPU-LOCK], outermost first", names)
	}
	if got[1].Lock.Properties.Level != api.LockCanNotDelete || got[1].Scope != cpu {
		t.Errorf("the replaced lock: %+v at %q", got[1].Lock, got[1].Scope)
	}
	got, err = LocksAround(ctx, db.Q(), lockWS, false)
	if err != nil || len(got) != 1 || got[0].Lock.Name != "ws-lock" {
		t.Errorf("locks at and above the workspace: %v %v, want [ws-lock]", lockNames(got), err)
	}
	got, err = LocksAround(ctx, db.Q(), lockWS, true)
	if names := lockNames(got); err != nil || len(names) != 3 {
		t.Errorf("locks at, above and below the workspace: %v %v, want its own and both computes'", names, err)
	}

	if l, err := GetLock(ctx, db.Q(), lockWS, "WS-LOCK"); err != nil || l.Lock.Properties.Notes != "n" || !l.Created.Equal(time.Unix(1000, 0)) {
		t.Errorf("get: %+v %v", l, err)
	}
	del := func() error {
		return db.Tx(ctx, func(q Querier) error { return DeleteLock(ctx, q, lockWS, "ws-lock") })
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	if _, err := GetLock(ctx, db.Q(), lockWS, "ws-lock"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if err := del(); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

// A lock goes with its resource, whoever deletes the resource's row (the
// operations controller deletes computes): a compute takes its own locks,
// a workspace its own and those of its computes; others stay.
func TestLocksGoWithTheirResource(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	wsParent, wsID := Key(lockGroup), Key(lockWS)
	for _, r := range []struct{ kind, parent, name string }{
		{KindWorkspace, wsParent, "ws"}, {KindWorkspace, wsParent, "ws2"}, {KindCompute, wsID, "cpu"}, {KindCompute, wsID, "gpu"},
	} {
		if _, err := Put(ctx, db.W(), r.kind, r.parent, r.name, map[string]string{}, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	putTestLock(t, db, lockWS, "ws", api.LockCanNotDelete)
	putTestLock(t, db, lockWS+"2", "ws2", api.LockCanNotDelete)
	putTestLock(t, db, lockWS+"/computes/cpu", "cpu", api.LockReadOnly)
	putTestLock(t, db, lockWS+"/computes/gpu", "gpu", api.LockReadOnly)

	if err := Delete(ctx, db.W(), KindCompute, wsID, "cpu", 0); err != nil {
		t.Fatal(err)
	}
	all := func() []string {
		var out []string
		for _, s := range []string{lockWS, lockWS + "2"} {
			ls, err := LocksAround(ctx, db.Q(), s, true)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lockNames(ls)...)
		}
		return out
	}
	if got := all(); len(got) != 3 || got[0] != "ws" || got[1] != "gpu" || got[2] != "ws2" {
		t.Errorf("after the compute's deletion: %v, want [ws gpu ws2]", got)
	}
	if err := Delete(ctx, db.W(), KindWorkspace, wsParent, "ws", 0); err != nil {
		t.Fatal(err)
	}
	if got := all(); len(got) != 1 || got[0] != "ws2" {
		t.Errorf("after the workspace's deletion: %v, want [ws2]", got)
	}
}

// On PostgreSQL a lock cannot be made while a write transaction that
// checked locks (GuardLocks) is open, while such writes do not wait for
// each other; the lock is made once the write ends.
func TestGuardLocksHoldsOffLockChanges(t *testing.T) {
	db := openTest(t)
	if db.Engine() != "postgres" {
		t.Skip("SQLite runs one write transaction at a time")
	}
	ctx := context.Background()
	l := api.Lock{ID: api.LockID(lockWS, "l"), Name: "l", Properties: api.LockProperties{Level: api.LockReadOnly}}
	inGuard := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Tx(ctx, func(q Querier) error {
			if err := GuardLocks(ctx, q); err != nil {
				return err
			}
			close(inGuard)
			<-release
			return nil
		})
	}()
	<-inGuard
	// lock_timeout makes a wait an immediate, deterministic failure.
	noWait := func(fn func(q Querier) error) error {
		return db.Tx(ctx, func(q Querier) error {
			if _, err := q.ExecContext(ctx, `SET LOCAL lock_timeout = '1ms'`); err != nil {
				return err
			}
			return fn(q)
		})
	}
	if err := noWait(func(q Querier) error { return GuardLocks(ctx, q) }); err != nil {
		t.Errorf("a second guarded write waited for the first: %v", err)
	}
	if err := noWait(func(q Querier) error { _, err := PutLock(ctx, q, lockWS, l, time.Unix(1, 0)); return err }); err == nil {
		t.Error("a lock was made while a guarded write was open")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := noWait(func(q Querier) error { _, err := PutLock(ctx, q, lockWS, l, time.Unix(1, 0)); return err }); err != nil {
		t.Errorf("the lock after the write ended: %v", err)
	}
}

// With more locks than the writer's view holds, the locks around a scope
// are found all the same (by SQL), and a new one is seen at once.
func TestLocksAroundPastWhatTheViewHolds(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	err := db.Tx(ctx, func(q Querier) error {
		for i := range maxViewedLocks + 1 {
			scope := fmt.Sprintf("%s/computes/c%d", lockWS, i)
			l := api.Lock{ID: api.LockID(scope, "l"), Name: "l", Type: api.TypeLock, Properties: api.LockProperties{Level: api.LockReadOnly}}
			if _, err := PutLock(ctx, q, scope, l, time.Unix(1000, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := LocksAround(ctx, db.Q(), lockWS+"/computes/c7", false)
		if err != nil || len(got) != 1 || got[0].Scope != lockWS+"/computes/c7" {
			t.Fatalf("the locks around c7: %+v %v, want its one", got, err)
		}
	}
	if got, err := LocksAround(ctx, db.Q(), lockWS, true); err != nil || len(got) != maxViewedLocks+1 {
		t.Fatalf("%d locks below the workspace (%v), want %d", len(got), err, maxViewedLocks+1)
	}
	putTestLock(t, db, lockWS, "ws-lock", api.LockCanNotDelete)
	if got, err := LocksAround(ctx, db.Q(), lockWS+"/computes/c7", false); err != nil || len(got) != 2 || got[0].Lock.Name != "ws-lock" {
		t.Fatalf("after a workspace lock, the locks around c7: %v %v, want [ws-lock l]", lockNames(got), err)
	}
}

// A look at the locks that cannot read them fails: a write it guards is
// refused, never let through as if there were none.
func TestLocksAroundFailsWhenItCannotRead(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	putTestLock(t, db, lockWS, "ws-lock", api.LockReadOnly)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := LocksAround(ctx, db.Q(), lockWS+"/computes/cpu", false); err == nil {
		t.Fatalf("with the store closed the locks read %v and no error", lockNames(got))
	}
}
