package server

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Management locks: Azure Resource Manager's Microsoft.Authorization/locks
// at a workspace or a compute, and the one check that refuses a person's
// request a lock forbids. Locks bind the API only: the controllers write
// nodes and computes through the store, so scaling, node replacement and
// deletions already accepted carry on under any lock.

const lockPath = "/providers/Microsoft.Authorization/locks"

// lockVersions are the api-versions of Microsoft.Authorization/locks whose
// shape Cumulus serves (2020-05-01 adds only systemData).
var lockVersions = []string{"2016-09-01", "2020-05-01"}

func (s *Server) lockRoutes() {
	r := &s.router
	for _, scope := range []string{ws, ws + "/computes/{name}"} {
		r.handle("GET", scope+lockPath, s.listLocks)
		r.handle("PUT", scope+lockPath+"/{lock}", s.putLock)
		r.handle("GET", scope+lockPath+"/{lock}", s.getLock)
		r.handle("DELETE", scope+lockPath+"/{lock}", s.deleteLock)
	}
}

// checkRouteAPIVersion checks the api-version of a request that matched
// pattern: the locks' versions on lock routes, the ML API's elsewhere.
func (s *Server) checkRouteAPIVersion(pattern, v string, p params) error {
	if !rbac.IsLockPath(pattern) {
		location := p["loc"]
		if location == "" {
			location = s.cfg.Defaults.Location
		}
		return s.checkAPIVersion(pattern, v, location)
	}
	if v == "" {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeMissingAPIVersion,
			Message: "the api-version query parameter is required; use api-version=" + lockVersions[0]}
	}
	if slices.Contains(lockVersions, v) {
		return nil
	}
	return &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidAPIVersion,
		Message: "api-version '" + v + "' is not supported for Microsoft.Authorization/locks; supported versions are " + strings.Join(lockVersions, ", ")}
}

// lockScope reads the resource a lock route names and returns its id: the
// compute when the path has one, else the workspace. 404 when absent.
func (s *Server) lockScope(ctx context.Context, q store.Querier, p params) (string, error) {
	sc := scopeOf(p)
	wd, err := store.Get[api.Workspace](ctx, q, store.KindWorkspace, sc.GroupID(), sc.Workspace)
	if isNotFound(err) {
		return "", api.NotFound("workspace %s was not found in resource group %s", sc.Workspace, sc.ResourceGroup)
	}
	if err != nil {
		return "", err
	}
	name, ok := p["name"]
	if !ok {
		return wd.Value.ID, nil
	}
	cd, err := s.compute(ctx, q, sc, name)
	if err != nil {
		return "", err
	}
	return cd.Value.ID, nil
}

func (s *Server) putLock(w http.ResponseWriter, r *http.Request, p params) error {
	name := p["lock"]
	if err := api.CheckLockName(name); err != nil {
		return err
	}
	var l api.Lock
	if err := decode(r, &l); err != nil {
		return err
	}
	if err := api.PrepareLock(&l); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var created bool
	err := s.tx(r, func(q store.Querier) error {
		scope, err := s.lockScope(r.Context(), q, p)
		if err != nil {
			return err
		}
		l.ID, l.Name, l.Type = api.LockID(scope, name), name, api.TypeLock
		created, err = store.PutLock(r.Context(), q, scope, l, now)
		return err
	})
	if err != nil {
		return err
	}
	s.log.Info("lock written", "lock", l.ID, "level", l.Properties.Level, "principal", principal(r), "created", created)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, l)
	return nil
}

func (s *Server) getLock(w http.ResponseWriter, r *http.Request, p params) error {
	scope, err := s.lockScope(r.Context(), s.db.Q(), p)
	if err != nil {
		return err
	}
	l, err := store.GetLock(r.Context(), s.db.Q(), scope, p["lock"])
	if isNotFound(err) {
		return api.LockNotFound(p["lock"], scope)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l.Lock)
	return nil
}

// deleteLock answers 200, or 204 when there was no such lock.
func (s *Server) deleteLock(w http.ResponseWriter, r *http.Request, p params) error {
	var scope string
	err := s.tx(r, func(q store.Querier) error {
		var err error
		if scope, err = s.lockScope(r.Context(), q, p); err != nil {
			return err
		}
		return store.DeleteLock(r.Context(), q, scope, p["lock"])
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("lock deleted", "lock", api.LockID(scope, p["lock"]), "principal", principal(r))
	w.WriteHeader(http.StatusOK)
	return nil
}

// listLocks lists the locks that apply at the scope (its own and its
// workspace's) and those of the resources under it; $filter=atScope()
// leaves out the ones under it, as ARM does. Locks are few: one page.
func (s *Server) listLocks(w http.ResponseWriter, r *http.Request, p params) error {
	below := true
	switch f := strings.ReplaceAll(r.URL.Query().Get("$filter"), " ", ""); f {
	case "":
	case "atScope()":
		below = false
	default:
		return api.BadRequest(api.CodeBadRequest, "$filter %q is not supported; the only filter is atScope()", f)
	}
	scope, err := s.lockScope(r.Context(), s.db.Q(), p)
	if err != nil {
		return err
	}
	ls, err := store.LocksAround(r.Context(), s.db.Q(), scope, below)
	if err != nil {
		return err
	}
	out := api.LockList{Value: make([]api.Lock, 0, len(ls))}
	for _, l := range ls {
		out.Value = append(out.Value, l.Lock)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Lock operations, in the words of ARM's refusals.
const (
	lockDelete = "delete"
	lockWrite  = "write"
)

// lockTarget says what resource a request would change and how, or ok
// false when no lock can refuse it: reads, listNodes (a POST that reads),
// the locks themselves (an Owner must be able to remove a lock), and
// anything outside a workspace (quotas, the Cumulus API).
func lockTarget(method, path string) (target, op string, ok bool) {
	if rbac.IsLockPath(path) {
		return "", "", false
	}
	path = strings.TrimSuffix(path, "/")
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) < 8 || !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[2], "resourceGroups") ||
		!strings.EqualFold(segs[4], "providers") || !strings.EqualFold(segs[5], api.Provider) || !strings.EqualFold(segs[6], "workspaces") {
		return "", "", false
	}
	switch method {
	case http.MethodDelete:
		return path, lockDelete, true
	case http.MethodPut, http.MethodPatch:
		return path, lockWrite, true
	case http.MethodPost:
		last := segs[len(segs)-1]
		if strings.EqualFold(last, "listNodes") {
			return "", "", false
		}
		return path[:len(path)-len(last)-1], lockWrite, true
	}
	return "", "", false
}

// lockConflict is the refusal of op on target, given the locks at, above
// and (for a delete) under it; nil when none forbids it. Any lock forbids
// deletion, of the locked resource, of what is under it and of what holds
// it (deleting a workspace deletes its computes); ReadOnly also forbids
// changes to the locked resource and what is under it.
func lockConflict(target, op string, locks []store.StoredLock) error {
	var scopes []string
	for _, l := range locks {
		if op == lockWrite && (l.Lock.Properties.Level != api.LockReadOnly || !rbac.Covers(l.Scope, target)) {
			continue
		}
		q := "'" + l.Scope + "'"
		if !slices.Contains(scopes, q) {
			scopes = append(scopes, q)
		}
	}
	if len(scopes) == 0 {
		return nil
	}
	return api.Conflict(api.CodeScopeLocked, "The scope '%s' cannot perform %s operation because following scope(s) are locked: %s. Please remove the lock and try again.",
		target, op, strings.Join(scopes, ","))
}

// checkLocks refuses a request that a lock forbids (409 ScopeLocked). It
// runs before the handler, after authorization, as ARM checks locks; a
// write transaction checks again inside itself (guardLocks).
func (s *Server) checkLocks(ctx context.Context, q store.Querier, r *http.Request) error {
	target, op, ok := lockTarget(r.Method, r.URL.Path)
	if !ok {
		return nil
	}
	locks, err := store.LocksAround(ctx, q, target, op == lockDelete)
	if err != nil {
		return err
	}
	return lockConflict(target, op, locks)
}

// guardLocks is checkLocks inside a request's write transaction: a lock
// made between the first check and the commit refuses the write too.
func (s *Server) guardLocks(r *http.Request, q store.Querier) error {
	if _, _, ok := lockTarget(r.Method, r.URL.Path); !ok {
		return nil
	}
	if err := store.GuardLocks(r.Context(), q); err != nil {
		return err
	}
	return s.checkLocks(r.Context(), q, r)
}
