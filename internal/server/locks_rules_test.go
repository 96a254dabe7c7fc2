package server

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// What each request would change, and which locks refuse it.
func TestLockRules(t *testing.T) {
	const w = "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w"
	const c = w + "/computes/c"
	lock := func(scope, level string) store.StoredLock {
		return store.StoredLock{Scope: scope, Lock: api.Lock{Name: "l", Properties: api.LockProperties{Level: level}}}
	}
	cases := []struct {
		method, path string
		locks        []store.StoredLock // as LocksAround finds them for the target
		refused      bool
	}{
		{"GET", c, []store.StoredLock{lock(c, api.LockReadOnly)}, false},
		{"POST", c + "/listNodes", []store.StoredLock{lock(c, api.LockReadOnly)}, false},
		{"POST", c + "/listKeys", []store.StoredLock{lock(c, api.LockReadOnly)}, true},
		{"POST", c + "/listKeys", []store.StoredLock{lock(c, api.LockCanNotDelete)}, false},
		{"PATCH", c, []store.StoredLock{lock(w, api.LockReadOnly)}, true},
		{"PATCH", c, []store.StoredLock{lock(w, api.LockCanNotDelete)}, false},
		{"DELETE", c, []store.StoredLock{lock(w, api.LockCanNotDelete)}, true},
		{"DELETE", w, []store.StoredLock{lock(c, api.LockCanNotDelete)}, true},
		{"DELETE", w + "/jobs/j", nil, false},
		{"PUT", w, []store.StoredLock{lock(c, api.LockReadOnly)}, false}, // a child's lock does not freeze its parent
		{"PATCH", w, []store.StoredLock{lock(w, api.LockReadOnly)}, true},
		{"PATCH", w, []store.StoredLock{lock(w, api.LockCanNotDelete)}, false},
		{"PUT", c + "/providers/Microsoft.Authorization/locks/l", []store.StoredLock{lock(c, api.LockReadOnly)}, false},
		{"DELETE", c + "/providers/Microsoft.Authorization/locks/l", []store.StoredLock{lock(c, api.LockReadOnly)}, false},
		{"POST", "/subscriptions/s/providers/Microsoft.MachineLearningServices/locations/l/updateQuotas", []store.StoredLock{lock(w, api.LockReadOnly)}, false},
		{"PUT", "/cumulus/v1/blobs/abc", []store.StoredLock{lock(w, api.LockReadOnly)}, false},
	}
	for _, tc := range cases {
		target, op, ok := lockTarget(tc.method, tc.path)
		var err error
		if ok {
			err = lockConflict(target, op, tc.locks)
		}
		if (err != nil) != tc.refused {
			t.Errorf("%s %s under %+v: refused %v, want %v", tc.method, tc.path, tc.locks, err, tc.refused)
		}
	}
	if target, op, _ := lockTarget("POST", c+"/nodes/n/simulateEviction"); target != c+"/nodes/n" || op != "write" {
		t.Errorf("eviction target %q %q, want the node under the compute, write", target, op)
	}
}
