package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
)

const lockVersion = "2016-09-01"

func lockPath(scope, name string) string {
	return scope + "/providers/Microsoft.Authorization/locks/" + name + "?api-version=" + lockVersion
}

func locksPath(scope string) string {
	return scope + "/providers/Microsoft.Authorization/locks?api-version=" + lockVersion
}

func lockBody(level string) map[string]any {
	return map[string]any{"properties": map[string]any{"level": level, "notes": "keep it", "owners": []any{map[string]any{"applicationId": "app-1"}}}}
}

func (h *harness) lock(scope, name, level string) api.Lock {
	h.t.Helper()
	var l api.Lock
	h.do("PUT", lockPath(scope, name), lockBody(level)).want(h.t, 201).json(h.t, &l)
	return l
}

func jobBody(compute string) map[string]any {
	return map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": computePath(compute)}}
}

func lockNames(t *testing.T, r *resp) []string {
	t.Helper()
	var list api.LockList
	r.json(t, &list)
	var out []string
	for _, l := range list.Value {
		out = append(out, l.Name)
	}
	return out
}

// The lock resource in ARM's shape: created (201), replaced (200), read,
// listed at a compute with the workspace's lock it inherits, deleted
// (200, then 204); its own api-versions, and 400s for bad bodies.
func TestLockAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	cpu := computePath("cpu")

	l := h.lock(hWSPath, "ws-lock", "CanNotDelete")
	if l.ID != hWSPath+"/providers/Microsoft.Authorization/locks/ws-lock" || l.Name != "ws-lock" || l.Type != "Microsoft.Authorization/locks" ||
		l.Properties.Level != "CanNotDelete" || l.Properties.Notes != "keep it" || len(l.Properties.Owners) != 1 || l.Properties.Owners[0].ApplicationID != "app-1" {
		t.Fatalf("created lock = %+v", l)
	}
	var got api.Lock
	h.do("PUT", lockPath(cpu, "cpu-lock"), map[string]any{"properties": map[string]any{"level": "readonly"}}).want(t, 201).json(t, &got)
	if got.Properties.Level != api.LockReadOnly || got.ID != cpu+"/providers/Microsoft.Authorization/locks/cpu-lock" {
		t.Fatalf("compute lock = %+v, want level ReadOnly in ARM's spelling at the compute", got)
	}
	h.do("PUT", lockPath(cpu, "CPU-LOCK"), lockBody("CanNotDelete")).want(t, 200).json(t, &got)
	h.do("GET", lockPath(cpu, "cpu-lock"), nil).want(t, 200).json(t, &got)
	if got.Properties.Level != api.LockCanNotDelete || got.Properties.Notes != "keep it" {
		t.Errorf("replaced lock = %+v", got)
	}
	if names := lockNames(t, h.do("GET", locksPath(cpu), nil).want(t, 200)); len(names) != 2 || names[0] != "ws-lock" {
		t.Errorf("locks at the compute = %v, want the workspace's and its own", names)
	}
	if names := lockNames(t, h.do("GET", locksPath(hWSPath), nil).want(t, 200)); len(names) != 2 {
		t.Errorf("locks at the workspace = %v, want its own and its compute's", names)
	}
	if names := lockNames(t, h.do("GET", locksPath(hWSPath)+"&$filter=atScope()", nil).want(t, 200)); len(names) != 1 || names[0] != "ws-lock" {
		t.Errorf("locks at the workspace, atScope() = %v, want its own", names)
	}
	h.do("GET", strings.Replace(lockPath(cpu, "cpu-lock"), lockVersion, "2020-05-01", 1), nil).want(t, 200)

	// api-versions: the locks' on lock routes, the ML API's elsewhere.
	h.do("GET", strings.Replace(lockPath(cpu, "cpu-lock"), lockVersion, hVersion, 1), nil).want(t, 400, api.CodeInvalidAPIVersion)
	h.raw("GET", cpu+"/providers/Microsoft.Authorization/locks/x", nil, "Authorization", "Bearer "+h.token).want(t, 400, api.CodeMissingAPIVersion)
	h.do("GET", cpu+"?api-version="+lockVersion, nil).want(t, 400, "NoRegisteredProviderFound")

	// Bad bodies and names: 400 in ARM's shape, nothing written.
	for _, c := range []struct {
		body           any
		code, target   string
		name, sentence string
	}{
		{map[string]any{"properties": map[string]any{"level": "Sometimes"}}, api.CodeValidationError, "properties.level", "x", "unknown level"},
		{map[string]any{"properties": map[string]any{"level": "NotSpecified"}}, api.CodeValidationError, "properties.level", "x", "NotSpecified"},
		{map[string]any{}, api.CodeValidationError, "properties.level", "x", "no properties"},
		{map[string]any{"properties": map[string]any{"level": "ReadOnly", "notes": strings.Repeat("n", 513)}}, api.CodeValidationError, "properties.notes", "x", "long notes"},
		{"[1]", api.CodeInvalidRequest, "", "x", "not an object"},
		{lockBody("ReadOnly"), api.CodeInvalidName, "", "a&b", "a name with &"},
	} {
		r := h.do("PUT", lockPath(cpu, c.name), c.body).want(t, 400, c.code)
		var e api.ErrorResponse
		r.json(t, &e)
		if e.Error.Target != c.target {
			t.Errorf("%s: target %q, want %q", c.sentence, e.Error.Target, c.target)
		}
	}
	if names := lockNames(t, h.do("GET", locksPath(cpu), nil).want(t, 200)); len(names) != 2 {
		t.Errorf("after refused PUTs, locks = %v", names)
	}

	// Unknown scopes and locks: 404.
	h.do("PUT", lockPath(computePath("nope"), "l"), lockBody("ReadOnly")).want(t, 404, api.CodeNotFound)
	other := strings.Replace(hWSPath, "/workspaces/"+hWS, "/workspaces/nope", 1)
	h.do("GET", locksPath(other), nil).want(t, 404, api.CodeNotFound)
	h.do("GET", lockPath(cpu, "nope"), nil).want(t, 404, api.CodeLockNotFound)

	h.do("DELETE", lockPath(cpu, "cpu-lock"), nil).want(t, 200)
	h.do("DELETE", lockPath(cpu, "cpu-lock"), nil).want(t, 204)
	h.do("GET", lockPath(cpu, "cpu-lock"), nil).want(t, 404, api.CodeLockNotFound)
}

// Only an Owner at the scope manages locks: a Contributor cannot create
// or remove one (403, the lock stays), an Owner of a compute cannot lock
// its workspace; every reading role reads them, a principal without a
// role cannot.
func TestLockAuthorization(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	cpu := computePath("cpu")
	contributor := h.user("carol", rbac.Contributor, hWSPath)
	reader := h.user("rita", rbac.Reader, hWSPath)
	owner := h.user("olga", rbac.Owner, hWSPath)
	computeOwner := h.user("otto", rbac.Owner, cpu)
	nobody := h.user("nora", "", "")

	h.as(contributor, "PUT", lockPath(cpu, "l"), lockBody("ReadOnly")).want(t, 403, api.CodeForbidden)
	h.as(reader, "PUT", lockPath(cpu, "l"), lockBody("ReadOnly")).want(t, 403, api.CodeForbidden)
	h.as(computeOwner, "PUT", lockPath(hWSPath, "l"), lockBody("ReadOnly")).want(t, 403, api.CodeForbidden)
	h.do("GET", lockPath(cpu, "l"), nil).want(t, 404, api.CodeLockNotFound)

	h.as(owner, "PUT", lockPath(cpu, "l"), lockBody("CanNotDelete")).want(t, 201)
	h.as(computeOwner, "PUT", lockPath(cpu, "l2"), lockBody("CanNotDelete")).want(t, 201)
	h.as(contributor, "DELETE", lockPath(cpu, "l"), nil).want(t, 403, api.CodeForbidden)
	h.do("GET", lockPath(cpu, "l"), nil).want(t, 200)
	// A Contributor cannot get round the lock either.
	h.as(contributor, "DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 409, api.CodeScopeLocked)

	for _, tok := range []string{contributor, reader} {
		h.as(tok, "GET", lockPath(cpu, "l"), nil).want(t, 200)
		h.as(tok, "GET", locksPath(cpu), nil).want(t, 200)
	}
	h.as(nobody, "GET", lockPath(cpu, "l"), nil).want(t, 403, api.CodeForbidden)
	h.as(nobody, "GET", locksPath(hWSPath), nil).want(t, 403, api.CodeForbidden)

	h.as(owner, "DELETE", lockPath(cpu, "l"), nil).want(t, 200)
	var statuses []int
	es := h.auditOf(strings.Split(lockPath(cpu, "l"), "?")[0])
	for _, e := range es {
		statuses = append(statuses, e.Status)
	}
	if len(es) != 5 || es[2].Operation != "Microsoft.Authorization/locks/write" || es[4].Operation != "Microsoft.Authorization/locks/delete" ||
		!slices.Equal(statuses, []int{403, 403, 201, 403, 200}) {
		t.Errorf("audit of the lock = %+v, want two refused PUTs, a PUT, a refused and a done DELETE", es)
	}
}

// CanNotDelete refuses deleting the compute, its workspace (forced or not)
// and, at the workspace, the workspace's children; it leaves changes
// alone. A refused request changes nothing.
func TestCanNotDeleteLock(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	cpu := computePath("cpu")
	h.lock(cpu, "keep", "CanNotDelete")

	r := h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 409, api.CodeScopeLocked)
	var e api.ErrorResponse
	r.json(t, &e)
	if want := "The scope '" + cpu + "' cannot perform delete operation because following scope(s) are locked: '" + cpu + "'. Please remove the lock and try again."; e.Error.Message != want {
		t.Errorf("message %q, want %q", e.Error.Message, want)
	}
	h.do("DELETE", hWSPath+"?forceToPurge=true", nil).want(t, 409, api.CodeScopeLocked)
	c := h.do("GET", cpu, nil).want(t, 200).compute(t)
	if c.Properties.ProvisioningState != api.StateSucceeded {
		t.Fatalf("compute after refused deletions is %s, want Succeeded", c.Properties.ProvisioningState)
	}
	h.do("GET", hWSPath, nil).want(t, 200)
	if es := h.auditOf(cpu); len(es) == 0 || es[len(es)-1].Status != http.StatusConflict {
		t.Errorf("audit of the compute = %+v, want the refused delete last, 409", es)
	}

	// Changes are allowed under CanNotDelete.
	h.do("PATCH", cpu, map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"maxNodeCount": 3}}}}).want(t, 200)
	h.do("PUT", cpu, computeBody()).want(t, 200)

	// At the workspace: its computes and jobs cannot be deleted either.
	h.do("DELETE", lockPath(cpu, "keep"), nil).want(t, 200)
	h.lock(hWSPath, "keep-ws", "CanNotDelete")
	h.do("PUT", hWSPath+"/jobs/j", jobBody("cpu")).want(t, 201)
	h.do("DELETE", hWSPath+"/jobs/j", nil).want(t, 409, api.CodeScopeLocked)
	h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 409, api.CodeScopeLocked)
	h.do("DELETE", lockPath(hWSPath, "keep-ws"), nil).want(t, 200)

	r = h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 202)
	if st := h.waitOp(r.Header.Get("Azure-AsyncOperation")); st.Status != api.OpSucceeded {
		t.Fatalf("delete once unlocked: %+v", st)
	}
}

// ReadOnly refuses every change to the locked compute — PUT, PATCH,
// listKeys (it hands out secrets, as in Azure), join tokens, evictions —
// but not reads, listNodes, nor jobs that run on it (they are the
// workspace's children, not the compute's). At the workspace it refuses
// its children's creation: computes and jobs.
func TestReadOnlyLock(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	cpu := computePath("cpu")
	h.lock(cpu, "frozen", "ReadOnly")
	before := h.do("GET", cpu, nil).want(t, 200)

	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PATCH", cpu, map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"maxNodeCount": 5}}}}},
		{"PUT", cpu, computeBody(func(m map[string]any) { inner(m)["scaleSettings"].(map[string]any)["maxNodeCount"] = 5 })},
		{"POST", cpu + "/listKeys", nil},
		{"POST", cpu + "/joinToken", nil},
		{"POST", cpu + "/nodes/n1/simulateEviction", nil},
		{"DELETE", cpu + "?underlyingResourceAction=Delete", nil},
	} {
		r := h.do(c.method, c.path, c.body).want(t, 409, api.CodeScopeLocked)
		var e api.ErrorResponse
		r.json(t, &e)
		if !strings.Contains(e.Error.Message, "following scope(s) are locked: '"+cpu+"'") {
			t.Errorf("%s %s: message %q does not name the lock's scope", c.method, c.path, e.Error.Message)
		}
	}
	after := h.do("GET", cpu, nil).want(t, 200)
	ac := after.compute(t)
	if after.Header.Get("ETag") != before.Header.Get("ETag") || *ac.Aml().ScaleSettings.MaxNodeCount != 2 {
		t.Errorf("the locked compute changed: ETag %s → %s, %s", before.Header.Get("ETag"), after.Header.Get("ETag"), after.Body)
	}
	h.do("POST", cpu+"/listNodes", nil).want(t, 200)
	h.do("GET", hWSPath+"/computes", nil).want(t, 200)
	h.do("PUT", hWSPath+"/jobs/j1", jobBody("cpu")).want(t, 201)
	h.do("POST", hWSPath+"/jobs/j1/cancel", nil).want(t, 202)
	h.do("PUT", computePath("gpu"), computeBody()).want(t, 201)

	// At the workspace: no new computes or jobs, no cancels, no changes.
	h.lock(hWSPath, "frozen-ws", "ReadOnly")
	h.do("PUT", hWSPath+"/jobs/j2", jobBody("cpu")).want(t, 409, api.CodeScopeLocked)
	h.do("PUT", computePath("tpu"), computeBody()).want(t, 409, api.CodeScopeLocked)
	h.do("PATCH", computePath("gpu"), map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"maxNodeCount": 5}}}}).want(t, 409, api.CodeScopeLocked)
	h.do("PUT", hWSPath, map[string]any{"location": hLoc}).want(t, 409, api.CodeScopeLocked)
	h.do("GET", hWSPath+"/jobs/j2", nil).want(t, 404)
	h.do("GET", computePath("tpu"), nil).want(t, 404)
	h.do("GET", hWSPath+"/jobs/j1", nil).want(t, 200)

	// Removing the locks lifts the refusals.
	h.do("DELETE", lockPath(hWSPath, "frozen-ws"), nil).want(t, 200)
	h.do("DELETE", lockPath(cpu, "frozen"), nil).want(t, 200)
	h.do("PATCH", cpu, map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"maxNodeCount": 5}}}}).want(t, 200)
}

// A deletion accepted before the compute was locked is not interrupted:
// the operation ends Succeeded, and the lock goes with the compute, so a
// compute made again under the name is not locked.
func TestDeletionAcceptedBeforeTheLockFinishes(t *testing.T) {
	h := newHarness(t, harnessOpts{manualOps: true})
	cpu := computePath("cpu")
	h.do("PUT", cpu, computeBody()).want(t, 201)
	if err := h.ops.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 202)
	h.lock(cpu, "late", "ReadOnly")
	h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 409, api.CodeScopeLocked)
	if err := h.ops.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	var st api.OperationStatus
	h.do("GET", r.Header.Get("Azure-AsyncOperation"), nil).want(t, 200).json(t, &st)
	if st.Status != api.OpSucceeded {
		t.Fatalf("the deletion accepted before the lock: %+v, want Succeeded", st)
	}
	h.do("GET", cpu, nil).want(t, 404)
	if names := lockNames(t, h.do("GET", locksPath(hWSPath), nil).want(t, 200)); len(names) != 0 {
		t.Errorf("locks left after the compute went: %v", names)
	}
	h.do("PUT", cpu, computeBody()).want(t, 201)
	if err := h.ops.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.do("DELETE", cpu+"?underlyingResourceAction=Delete", nil).want(t, 202)
}
