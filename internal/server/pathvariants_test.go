package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// pathVariants are spellings of one ARM path that the router accepts:
// each must meet the same lock and role checks as the path itself.
var pathVariants = []struct {
	name  string
	spell func(path string) string
}{
	{"as is", func(p string) string { return p }},
	{"leading //", func(p string) string { return "/" + p }},
	{"inner //", func(p string) string { return strings.Replace(p, "/providers/", "//providers/", 1) }},
	{"/./", func(p string) string { return strings.Replace(p, "/providers/", "/./providers/", 1) }},
	{"%2F", func(p string) string { i := strings.LastIndex(p, "/"); return p[:i] + "%2F" + p[i+1:] }},
	{"%2f before providers", func(p string) string { return strings.Replace(p, "/providers/", "%2fproviders/", 1) }},
	{"upper case", strings.ToUpper},
	{"trailing /", func(p string) string { return p + "/" }},
	{"all at once", func(p string) string {
		return "//" + strings.ToUpper(strings.Replace(strings.TrimPrefix(p, "/"), "/providers/", "/.//providers%2F", 1)) + "/"
	}},
}

// spelled applies a variant to the path of a path?query.
func spelled(spell func(string) string, pathQuery string) string {
	p, q, ok := strings.Cut(pathQuery, "?")
	if ok {
		return spell(p) + "?" + q
	}
	return spell(p)
}

// TestPathVariantsMeetLocksAndRoles: every lock and role check refuses
// the request under every spelling of its path (before, a leading //
// skipped the lock check: a Contributor deleted a CanNotDelete compute,
// read a ReadOnly compute's keys and made jobs in a ReadOnly workspace).
func TestPathVariantsMeetLocksAndRoles(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ws2 := strings.Replace(hWSPath, "/workspaces/"+hWS, "/workspaces/ws2", 1)
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	h.create("keep", computeBody())
	h.create("frozen", computeBody())
	h.create("open", computeBody())
	h.lock(computePath("keep"), "nodelete", "CanNotDelete")
	h.lock(computePath("frozen"), "readonly", "ReadOnly")
	r := h.do("PUT", ws2+"/computes/cpu2", computeBody()).want(t, 201)
	h.waitOp(r.Header.Get("Azure-AsyncOperation"))
	job2 := map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true", "computeId": ws2 + "/computes/cpu2"}}
	h.lock(ws2, "readonly", "ReadOnly")
	contributorAll := h.user("everything", "Contributor", "/")
	reader := h.user("reader", "Reader", hWSPath)
	operator := h.user("operator", "ComputeOperator", hWSPath)
	other := h.user("other-team", "Contributor", ws2)

	scale := map[string]any{"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{"maxNodeCount": 7}}}}
	locked := []struct {
		method, path string
		body         any
	}{
		{"DELETE", computePath("keep") + "?underlyingResourceAction=Delete", nil},
		{"DELETE", hWSPath + "?forceToPurge=true", nil},
		{"POST", computePath("frozen") + "/listKeys", nil},
		{"POST", computePath("frozen") + "/joinToken", nil},
		{"PATCH", computePath("frozen"), scale},
		{"PUT", computePath("frozen"), computeBody()},
		{"PUT", ws2 + "/jobs/sneaky", job2},
		{"PUT", ws2 + "/computes/sneaky", computeBody()},
	}
	refused := []struct {
		who          string
		token        string
		method, path string
		body         any
	}{
		{"Reader", reader, "DELETE", computePath("open") + "?underlyingResourceAction=Delete", nil},
		{"Reader", reader, "POST", computePath("open") + "/listKeys", nil},
		{"Reader", reader, "PUT", hWSPath + "/jobs/by-reader", jobBody("open")},
		{"ComputeOperator", operator, "PUT", computePath("open"), computeBody()},
		{"ComputeOperator", operator, "POST", computePath("open") + "/listKeys", nil},
		{"another workspace's Contributor", other, "GET", computePath("open"), nil},
		{"another workspace's Contributor", other, "DELETE", computePath("open") + "?underlyingResourceAction=Delete", nil},
		{"Contributor", contributorAll, "DELETE", lockPath(computePath("keep"), "nodelete"), nil},
		{"Contributor", contributorAll, "PUT", lockPath(computePath("open"), "mine"), lockBody("ReadOnly")},
	}
	for _, v := range pathVariants {
		t.Run(v.name, func(t *testing.T) {
			for _, c := range locked {
				r := h.as(contributorAll, c.method, spelled(v.spell, c.path), c.body)
				if r.Status != 409 || r.errCode(t) != api.CodeScopeLocked {
					t.Errorf("%s %s by a Contributor at /: %d %s; want 409 ScopeLocked", c.method, spelled(v.spell, c.path), r.Status, r.Body)
				}
			}
			for _, c := range refused {
				r := h.as(c.token, c.method, spelled(v.spell, c.path), c.body)
				if r.Status != 403 || r.errCode(t) != api.CodeForbidden {
					t.Errorf("%s %s by %s: %d %s; want 403 Forbidden", c.method, spelled(v.spell, c.path), c.who, r.Status, r.Body)
				}
			}
		})
	}
	// Nothing changed: the computes and locks are there, no job was made.
	for _, name := range []string{"keep", "frozen", "open"} {
		c := h.do("GET", computePath(name), nil).want(t, 200).compute(t)
		if c.Properties.ProvisioningState != api.StateSucceeded || *c.Aml().ScaleSettings.MaxNodeCount != 2 {
			t.Errorf("compute %s changed: %s, max %d", name, c.Properties.ProvisioningState, *c.Aml().ScaleSettings.MaxNodeCount)
		}
	}
	h.do("GET", lockPath(computePath("keep"), "nodelete"), nil).want(t, 200)
	h.do("GET", lockPath(computePath("open"), "mine"), nil).want(t, 404)
	h.do("GET", ws2+"/jobs/sneaky", nil).want(t, 404)
	h.do("GET", hWSPath+"/jobs/by-reader", nil).want(t, 404)

	// The canonical id is what the audit log records, whatever the spelling.
	if es := h.auditOf(computePath("keep")); len(es) < len(pathVariants) {
		t.Errorf("audit of %s has %d entries, want one per spelling (%d): %+v", computePath("keep"), len(es), len(pathVariants), es)
	}
	// A ".." segment is refused, not resolved.
	r = h.do("DELETE", hWSPath+"/computes/open/../keep?underlyingResourceAction=Delete", nil).want(t, 400)
	if !strings.Contains(string(r.Body), "'..'") {
		t.Errorf("the refusal of .. does not say why: %s", r.Body)
	}
}
