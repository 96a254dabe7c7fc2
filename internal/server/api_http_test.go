package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func TestAuthentication(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"no header", nil},
		{"unknown token", []string{"Authorization", "Bearer cml_not-a-real-token"}},
		{"empty bearer", []string{"Authorization", "Bearer "}},
		{"basic scheme", []string{"Authorization", "Basic " + h.token}},
		{"token without scheme", []string{"Authorization", h.token}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.raw("GET", withVersion(computePath("c1")), nil, tc.hdr...).want(t, 401, "AuthenticationFailed")
			if !strings.Contains(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// Writes without a token change nothing.
	h.raw("PUT", withVersion(computePath("noauth")), computeBody()).want(t, 401, "AuthenticationFailed")
	h.do("GET", computePath("noauth"), nil).want(t, 404, "ResourceNotFound")
	// The scheme is case-insensitive.
	h.raw("GET", withVersion(hWSPath), nil, "Authorization", "bearer "+h.token).want(t, 200)
}

func TestExpiredToken(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const tok = "cml_expired-token-for-the-test"
	err := store.InsertToken(context.Background(), h.db.Q(), store.Token{ID: "t-exp", Name: "old", Role: "Owner",
		Hash: secret.Hash(tok), Created: time.Now().Add(-2 * time.Hour), Expires: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	r := h.raw("GET", withVersion(hWSPath), nil, "Authorization", "Bearer "+tok).want(t, 401, "AuthenticationFailed")
	if !strings.Contains(string(r.Body), "expired") {
		t.Errorf("401 body does not say the token expired: %s", r.Body)
	}
	const live = "cml_live-token-for-the-test"
	err = store.InsertToken(context.Background(), h.db.Q(), store.Token{ID: "t-live", Name: "reader", Role: "Owner",
		Hash: secret.Hash(live), Created: time.Now(), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	err = store.PutRoleAssignment(context.Background(), h.db.Q(), store.RoleAssignment{ID: "ra-live", Principal: "reader", Role: "Contributor", Scope: "/", Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	h.raw("PUT", withVersion(computePath("by-reader")), computeBody(), "Authorization", "Bearer "+live).want(t, 201)
	if c := h.do("GET", computePath("by-reader"), nil).want(t, 200).compute(t); c.SystemData == nil || c.SystemData.CreatedBy != "reader" {
		t.Errorf("systemData does not name the caller: %+v", c.SystemData)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.do("GET", "/nothing/here", nil).want(t, 404)
	h.do("GET", hLocPath+"/bogus", nil).want(t, 404)
	h.do("GET", hWSPath+"/computes/c1/extra/segments", nil).want(t, 404)
	h.do("POST", computePath("c1"), nil).want(t, 405, "MethodNotAllowed")
	h.do("DELETE", hLocPath+"/vmSizes", nil).want(t, 405, "MethodNotAllowed")
	h.do("PUT", hWSPath+"/computes", nil).want(t, 405, "MethodNotAllowed")
	// Literal segments match ignoring case, as ARM's do.
	h.do("GET", strings.ToLower(hWSPath), nil).want(t, 200)
	// Bad path segments are refused with ARM errors.
	h.do("GET", "/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/w!/computes", nil).want(t, 400)
	h.do("GET", "/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/nope/computes", nil).want(t, 404, "ParentResourceNotFound")
}

func TestComputeCreateAndUpdate(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	body := computeBody(func(m map[string]any) { m["tags"] = map[string]string{"team": "ml"} })
	r := h.do("PUT", computePath("cpu-cluster"), body).want(t, 201)
	c := r.compute(t)
	if c.Properties.ProvisioningState != "Creating" {
		t.Errorf("PUT provisioningState = %q, want Creating", c.Properties.ProvisioningState)
	}
	if c.ID != computePath("cpu-cluster") || c.Name != "cpu-cluster" || c.Type != api.TypeCompute || c.Location != hLoc {
		t.Errorf("envelope: id %q name %q type %q location %q", c.ID, c.Name, c.Type, c.Location)
	}
	if r.Header.Get("ETag") == "" {
		t.Error("PUT without ETag")
	}
	link := r.Header.Get("Azure-AsyncOperation")
	u := h.absoluteLink(t, link)
	if !strings.Contains(u.Path, "/operationStatuses/") {
		t.Errorf("Azure-AsyncOperation %q", link)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on 201")
	}

	var st api.OperationStatus
	h.do("GET", link, nil).want(t, 200).json(t, &st)
	if st.Status != "InProgress" && st.Status != "Succeeded" {
		t.Errorf("first status %q", st.Status)
	}
	st = h.waitOp(link)
	if st.Status != "Succeeded" || st.Name == "" || st.StartTime == nil || st.EndTime == nil || st.Error != nil {
		t.Errorf("final operation status %+v", st)
	}

	r = h.do("GET", computePath("cpu-cluster"), nil).want(t, 200)
	got := r.compute(t)
	etag1 := r.Header.Get("ETag")
	a := got.Aml()
	if got.Properties.ProvisioningState != "Succeeded" || a.VMSize != "Standard_DS2_v2" || *a.ScaleSettings.MaxNodeCount != 2 ||
		a.ScaleSettings.NodeIdleTimeBeforeScaleDown != "PT5M" || got.Tags["team"] != "ml" || got.Properties.Description != "test cluster" {
		t.Errorf("GET after create: %+v / %+v", got.Properties, a)
	}
	if a.AllocationState != "Steady" || a.CurrentNodeCount != 0 || got.Properties.CreatedOn == nil || got.SystemData == nil || got.SystemData.CreatedBy != "admin" {
		t.Errorf("read-only fields: %+v systemData %+v", a, got.SystemData)
	}
	if etag1 == "" {
		t.Fatal("GET without ETag")
	}

	// A second PUT updates: 200, no operation, state stays Succeeded.
	upd := computeBody(func(m map[string]any) {
		m["properties"].(map[string]any)["description"] = "changed"
		inner(m)["scaleSettings"] = map[string]any{"maxNodeCount": 6, "minNodeCount": 1}
	})
	r = h.do("PUT", computePath("cpu-cluster"), upd).want(t, 200)
	if r.Header.Get("Azure-AsyncOperation") != "" {
		t.Error("update PUT started an operation")
	}
	if r.Header.Get("ETag") == etag1 {
		t.Error("ETag did not change on update")
	}
	got = h.do("GET", computePath("cpu-cluster"), nil).want(t, 200).compute(t)
	if got.Properties.Description != "changed" || *got.Aml().ScaleSettings.MaxNodeCount != 6 || *got.Aml().ScaleSettings.MinNodeCount != 1 ||
		got.Properties.ProvisioningState != "Succeeded" || !got.Properties.CreatedOn.Equal(*c.Properties.CreatedOn) {
		t.Errorf("after update: %+v", got.Properties)
	}
	if got.Tags != nil {
		t.Errorf("tags not replaced by the full PUT: %v", got.Tags)
	}
	// Immutable fields refuse the update and leave the compute alone.
	bad := computeBody(func(m map[string]any) { inner(m)["vmSize"] = "Standard_DS4_v2" })
	h.do("PUT", computePath("cpu-cluster"), bad).want(t, 400, "PropertyChangeNotAllowed")
	if got := h.do("GET", computePath("cpu-cluster"), nil).want(t, 200).compute(t); got.Aml().VMSize != "Standard_DS2_v2" {
		t.Errorf("vmSize changed to %s", got.Aml().VMSize)
	}
	// An operation id nobody issued is a 404.
	h.do("GET", hLocPath+"/operationStatuses/00000000-0000-0000-0000-000000000000", nil).want(t, 404, "ResourceNotFound")
}

func TestMalformedBodiesStoreNothing(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	bodies := map[string]string{
		"empty":          "",
		"blank":          "  \n",
		"truncated":      `{"properties":{"computeType":"AmlCompute"`,
		"array":          `[]`,
		"string":         `"AmlCompute"`,
		"number props":   `{"properties":5}`,
		"two objects":    `{"properties":{"computeType":"AmlCompute"}} {}`,
		"trailing junk":  `{"properties":{"computeType":"AmlCompute"}}x`,
		"max as string":  `{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":"four"}}}}`,
		"max overflow":   `{"properties":{"computeType":"AmlCompute","properties":{"scaleSettings":{"maxNodeCount":4294967296}}}}`,
		"tags not a map": `{"tags":["a"],"properties":{"computeType":"AmlCompute"}}`,
		"not json":       `computeType: AmlCompute`,
	}
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			h.do("PUT", computePath("bad-json"), b).want(t, 400, "InvalidRequestContent")
		})
	}
	big := `{"properties":{"computeType":"AmlCompute","description":"` + strings.Repeat("x", 1<<20) + `"}}`
	h.do("PUT", computePath("bad-json"), big).want(t, 400, "InvalidRequestContent")
	h.do("GET", computePath("bad-json"), nil).want(t, 404, "ResourceNotFound")
	h.do("PATCH", computePath("bad-json"), `{"properties":`).want(t, 400, "InvalidRequestContent")
	h.do("PUT", hWSPath, `{"location":`).want(t, 400, "InvalidRequestContent")
	h.do("POST", hLocPath+"/updateQuotas", `[1,2]`).want(t, 400, "InvalidRequestContent")
	var page api.Page[api.Compute]
	h.do("GET", hWSPath+"/computes", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 0 {
		t.Errorf("list after bad PUTs: %d computes", len(page.Value))
	}
	if ops, err := store.PendingOperations(context.Background(), h.db.Q()); err != nil || len(ops) != 0 {
		t.Errorf("operations queued by bad PUTs: %v %v", ops, err)
	}
}

func TestValidationErrorChangesNothing(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.do("PUT", computePath("cpu-cluster"), computeBody(func(m map[string]any) {
		inner(m)["scaleSettings"] = map[string]any{"maxNodeCount": 0}
	})).want(t, 400, "ValidationError")
	var e api.ErrorResponse
	r.json(t, &e)
	if e.Error.Target != "properties.properties.scaleSettings.maxNodeCount" {
		t.Errorf("target %q", e.Error.Target)
	}
	r = h.do("PUT", computePath("cpu-cluster"), computeBody(func(m map[string]any) { inner(m)["vmSize"] = "Standard_DS3" })).want(t, 400, "ValidationError")
	if !strings.Contains(string(r.Body), "Standard_DS3_v2") {
		t.Errorf("unknown size error does not suggest Standard_DS3_v2: %s", r.Body)
	}
	// Several problems: one error whose details name each field.
	r = h.do("PUT", computePath("cpu-1"), computeBody(func(m map[string]any) {
		inner(m)["vmSize"] = "nope"
		inner(m)["osType"] = "Windows"
	})).want(t, 400, "InvalidResourceName")
	r.json(t, &e)
	if len(e.Error.Details) != 3 {
		t.Errorf("details %+v", e.Error.Details)
	}
	h.do("PUT", computePath("inst-a"), computeBody(func(m map[string]any) {
		m["properties"].(map[string]any)["computeType"] = "ComputeInstance"
	})).want(t, 400, "UnsupportedComputeType")
	for _, n := range []string{"cpu-cluster", "cpu-1", "inst-a"} {
		h.do("GET", computePath(n), nil).want(t, 404, "ResourceNotFound")
	}
	if ops, _ := store.PendingOperations(context.Background(), h.db.Q()); len(ops) != 0 {
		t.Errorf("operations queued: %v", ops)
	}
	// A compute in a workspace that does not exist.
	h.do("PUT", "/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/nows/computes/c1", computeBody()).
		want(t, 404, "ParentResourceNotFound")
}

func TestETags(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("etag-c", computeBody())
	r := h.do("GET", computePath("etag-c"), nil).want(t, 200)
	etag := r.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) {
		t.Fatalf("ETag %q is not quoted", etag)
	}
	changed := computeBody(func(m map[string]any) { m["properties"].(map[string]any)["description"] = "new" })

	for _, stale := range []string{`"999"`, `W/"999"`, `garbage`, `"0"`} {
		h.do("PUT", computePath("etag-c"), changed, "If-Match", stale).want(t, 412, "PreconditionFailed")
		h.do("PATCH", computePath("etag-c"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`, "If-Match", stale).want(t, 412, "PreconditionFailed")
		h.do("DELETE", computePath("etag-c")+"?underlyingResourceAction=Delete", nil, "If-Match", stale).want(t, 412, "PreconditionFailed")
	}
	r = h.do("GET", computePath("etag-c"), nil).want(t, 200)
	if c := r.compute(t); c.Properties.Description != "test cluster" || *c.Aml().ScaleSettings.MaxNodeCount != 2 || c.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("a failed precondition changed the compute: %+v", c.Properties)
	}
	if r.Header.Get("ETag") != etag {
		t.Errorf("ETag moved from %s to %s", etag, r.Header.Get("ETag"))
	}

	h.do("PUT", computePath("etag-c"), changed, "If-None-Match", "*").want(t, 412, "PreconditionFailed")
	r = h.do("PUT", computePath("etag-c"), changed, "If-Match", etag).want(t, 200)
	etag2 := r.Header.Get("ETag")
	if etag2 == etag {
		t.Error("ETag unchanged after PUT")
	}
	h.do("PUT", computePath("etag-c"), changed, "If-Match", etag).want(t, 412, "PreconditionFailed")
	r = h.do("PATCH", computePath("etag-c"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`, "If-Match", etag2).want(t, 200)
	if r.Header.Get("ETag") == etag2 {
		t.Error("ETag unchanged after PATCH")
	}
	h.do("PUT", computePath("etag-new"), computeBody(), "If-None-Match", "*").want(t, 201)

	// Workspaces honour the same headers.
	w := h.do("GET", hWSPath, nil).want(t, 200)
	h.do("PUT", hWSPath, map[string]any{"location": hLoc}, "If-None-Match", "*").want(t, 412, "PreconditionFailed")
	h.do("PUT", hWSPath, map[string]any{"location": hLoc}, "If-Match", `"12345"`).want(t, 412, "PreconditionFailed")
	h.do("PUT", hWSPath, map[string]any{"location": hLoc}, "If-Match", w.Header.Get("ETag")).want(t, 200)
}

// TestIfMatchOnMissingCompute: RFC 9110 §13.1.1 — If-Match with an etag
// on a resource that does not exist must fail with 412.
func TestIfMatchOnMissingCompute(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var bad []string
	for _, etag := range []string{`"1"`, "*"} {
		r := h.do("PUT", computePath("missing"), computeBody(), "If-Match", etag)
		if r.Status != 412 {
			bad = append(bad, fmt.Sprintf("If-Match %s -> %d %s", etag, r.Status, r.Header.Get("x-ms-error-code")))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("PUT with If-Match on a compute that does not exist does not answer 412 PreconditionFailed: %v", bad)
	}
}

func TestConcurrentWritesWithETag(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("race", computeBody())
	etag := h.do("GET", computePath("race"), nil).want(t, 200).Header.Get("ETag")
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"properties":{"properties":{"scaleSettings":{"maxNodeCount":%d}}}}`, 10+i)
			statuses[i] = h.do("PATCH", computePath("race"), body, "If-Match", etag).Status
		}()
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case 200:
			ok++
		case 412:
		default:
			t.Errorf("status %d", s)
		}
	}
	if ok != 1 {
		t.Errorf("%d PATCHes with the same If-Match succeeded, want exactly 1 (%v)", ok, statuses)
	}

	// Concurrent creates of one name with If-None-Match: one wins.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = h.do("PUT", computePath("race-new"), computeBody(), "If-None-Match", "*").Status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case 201:
			created++
		case 409, 412:
		default:
			t.Errorf("status %d", s)
		}
	}
	if created != 1 {
		t.Errorf("%d concurrent creates succeeded, want 1 (%v)", created, statuses)
	}
}

func TestListPaging(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("pg-%c", 'a'+i)
		want = append(want, name)
		h.do("PUT", computePath(name), computeBody()).want(t, 201)
	}
	follow := func(first string) ([]string, int) {
		var names []string
		pages := 0
		link := first
		for link != "" {
			var page api.Page[api.Compute]
			h.do("GET", link, nil).want(t, 200).json(t, &page)
			pages++
			if len(page.Value) > hPageSize {
				t.Errorf("page of %d items, page size %d", len(page.Value), hPageSize)
			}
			for _, c := range page.Value {
				names = append(names, c.Name)
			}
			if page.NextLink != "" {
				h.absoluteLink(t, page.NextLink)
			}
			link = page.NextLink
			if pages > 20 {
				t.Fatal("paging does not end")
			}
		}
		return names, pages
	}
	names, pages := follow(hWSPath + "/computes")
	if pages != 3 {
		t.Errorf("%d pages for 7 computes at page size %d", pages, hPageSize)
	}
	if !sort.StringsAreSorted(names) || strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("names %v, want %v", names, want)
	}
	names, pages = follow(hWSPath + "/computes?$top=2")
	if pages != 4 || len(names) != 7 {
		t.Errorf("$top=2: %d pages, %v", pages, names)
	}
	// The raw first page: nextLink is absolute and keeps api-version.
	var page map[string]any
	h.do("GET", hWSPath+"/computes", nil).want(t, 200).json(t, &page)
	if _, ok := page["nextLink"].(string); !ok {
		t.Errorf("first page without nextLink: %v", page)
	}
	h.do("GET", hWSPath+"/computes?$skipToken=!!!", nil).want(t, 400)
	// An empty workspace lists [] (not null).
	h.do("PUT", "/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/empty-ws", map[string]any{}).want(t, 201)
	r := h.do("GET", "/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/empty-ws/computes", nil).want(t, 200)
	if !strings.Contains(string(r.Body), `"value":[]`) {
		t.Errorf("empty list body %s", r.Body)
	}
}

func TestPatchScaleSettings(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("patchme", computeBody())
	r := h.do("PATCH", computePath("patchme"), map[string]any{
		"properties": map[string]any{"properties": map[string]any{"scaleSettings": map[string]any{
			"maxNodeCount": 7, "minNodeCount": 1, "nodeIdleTimeBeforeScaleDown": "PT10M",
		}}},
	}).want(t, 200)
	c := r.compute(t)
	s := c.Aml().ScaleSettings
	if *s.MaxNodeCount != 7 || *s.MinNodeCount != 1 || s.NodeIdleTimeBeforeScaleDown != "PT10M" || c.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("PATCH answer %+v %s", s, c.Properties.ProvisioningState)
	}
	got := h.do("GET", computePath("patchme"), nil).want(t, 200).compute(t)
	if s := got.Aml().ScaleSettings; *s.MaxNodeCount != 7 || *s.MinNodeCount != 1 || s.NodeIdleTimeBeforeScaleDown != "PT10M" {
		t.Errorf("GET after PATCH %+v", s)
	}
	if got.Properties.Description != "test cluster" || got.Aml().VMSize != "Standard_DS2_v2" {
		t.Errorf("PATCH changed other fields: %+v", got.Properties)
	}
	// Only max: the rest is kept.
	h.do("PATCH", computePath("patchme"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":9}}}}`).want(t, 200)
	got = h.do("GET", computePath("patchme"), nil).want(t, 200).compute(t)
	if s := got.Aml().ScaleSettings; *s.MaxNodeCount != 9 || *s.MinNodeCount != 1 || s.NodeIdleTimeBeforeScaleDown != "PT10M" {
		t.Errorf("partial PATCH %+v", s)
	}

	for name, body := range map[string]string{
		"single nesting":   `{"properties":{"scaleSettings":{"maxNodeCount":3}}}`,
		"flat":             `{"scaleSettings":{"maxNodeCount":3}}`,
		"empty object":     `{}`,
		"no scaleSettings": `{"properties":{"properties":{}}}`,
		"min > max":        `{"properties":{"properties":{"scaleSettings":{"minNodeCount":20}}}}`,
		"max 0":            `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":0}}}}`,
		"bad idle":         `{"properties":{"properties":{"scaleSettings":{"nodeIdleTimeBeforeScaleDown":"5 minutes"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			h.do("PATCH", computePath("patchme"), body).want(t, 400, "ValidationError")
		})
	}
	h.do("PATCH", computePath("patchme"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":"x"}}}}`).want(t, 400, "InvalidRequestContent")
	got = h.do("GET", computePath("patchme"), nil).want(t, 200).compute(t)
	if s := got.Aml().ScaleSettings; *s.MaxNodeCount != 9 || *s.MinNodeCount != 1 {
		t.Errorf("bad PATCH changed the compute: %+v", s)
	}
	h.do("PATCH", computePath("nosuch"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`).want(t, 404, "ResourceNotFound")
}

func TestDeleteCompute(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("deleteme", computeBody())
	h.do("DELETE", computePath("deleteme"), nil).want(t, 400, "BadRequest")
	h.do("DELETE", computePath("deleteme")+"?underlyingResourceAction=Nuke", nil).want(t, 400, "BadRequest")
	h.do("GET", computePath("deleteme"), nil).want(t, 200)

	r := h.do("DELETE", computePath("deleteme")+"?underlyingResourceAction=Delete", nil).want(t, 202)
	async, loc := r.Header.Get("Azure-AsyncOperation"), r.Header.Get("Location")
	h.absoluteLink(t, async)
	h.absoluteLink(t, loc)
	if len(r.Body) != 0 {
		t.Errorf("202 with a body: %s", r.Body)
	}
	if st := h.waitOp(async); st.Status != "Succeeded" {
		t.Fatalf("delete operation %+v", st)
	}
	h.do("GET", loc, nil).want(t, 204)
	h.do("GET", computePath("deleteme"), nil).want(t, 404, "ResourceNotFound")
	h.do("DELETE", computePath("deleteme")+"?underlyingResourceAction=Delete", nil).want(t, 204)
	h.do("DELETE", computePath("never-was")+"?underlyingResourceAction=Detach", nil).want(t, 204)
	var page api.Page[api.Compute]
	h.do("GET", hWSPath+"/computes", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 0 {
		t.Errorf("deleted compute still listed: %+v", page.Value)
	}
	// The name can be used again.
	h.create("deleteme", computeBody())
}

// TestOperationsWithoutRunner drives the operations by hand: a compute is
// Creating until the controller runs, a second PUT meanwhile is refused,
// and a DELETE during the create cancels the create.
func TestOperationsWithoutRunner(t *testing.T) {
	h := newHarness(t, harnessOpts{manualOps: true})
	ctx := context.Background()
	r := h.do("PUT", computePath("slow"), computeBody()).want(t, 201)
	create := r.Header.Get("Azure-AsyncOperation")
	var st api.OperationStatus
	h.do("GET", create, nil).want(t, 200).json(t, &st)
	if st.Status != "InProgress" {
		t.Fatalf("status before the controller ran: %q", st.Status)
	}
	if rr := h.do("GET", create, nil); rr.Header.Get("Retry-After") == "" {
		t.Error("InProgress status without Retry-After")
	}
	h.do("PUT", computePath("slow"), computeBody()).want(t, 409, "OperationNotAllowed")
	if c := h.do("GET", computePath("slow"), nil).want(t, 200).compute(t); c.Properties.ProvisioningState != "Creating" {
		t.Errorf("state %q", c.Properties.ProvisioningState)
	}
	r = h.do("DELETE", computePath("slow")+"?underlyingResourceAction=Delete", nil).want(t, 202)
	del, loc := r.Header.Get("Azure-AsyncOperation"), r.Header.Get("Location")
	h.do("GET", loc, nil).want(t, 202)
	h.do("PUT", computePath("slow"), computeBody()).want(t, 409, "OperationNotAllowed")
	h.do("PATCH", computePath("slow"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`).want(t, 409, "OperationNotAllowed")
	if err := h.ops.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	h.do("GET", create, nil).want(t, 200).json(t, &st)
	if st.Status != "Canceled" || st.Error == nil {
		t.Errorf("create superseded by delete: %+v", st)
	}
	h.do("GET", del, nil).want(t, 200).json(t, &st)
	if st.Status != "Succeeded" {
		t.Errorf("delete: %+v", st)
	}
	h.do("GET", loc, nil).want(t, 204)
	h.do("GET", computePath("slow"), nil).want(t, 404)
}

// TestRepeatedDeleteReusesOperation: a DELETE on a compute already being
// deleted answers with the delete operation already queued, also while
// the create operation is still pending.
func TestRepeatedDeleteReusesOperation(t *testing.T) {
	h := newHarness(t, harnessOpts{manualOps: true})
	ctx := context.Background()
	h.do("PUT", computePath("twice"), computeBody()).want(t, 201)
	first := h.do("DELETE", computePath("twice")+"?underlyingResourceAction=Delete", nil).want(t, 202).Header.Get("Azure-AsyncOperation")
	second := h.do("DELETE", computePath("twice")+"?underlyingResourceAction=Delete", nil).want(t, 202).Header.Get("Azure-AsyncOperation")
	ops, err := store.PendingOperations(ctx, h.db.Q())
	if err != nil {
		t.Fatal(err)
	}
	deletes := 0
	for _, op := range ops {
		if op.Kind == "compute.delete" {
			deletes++
		}
	}
	if err := h.ops.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	h.do("GET", computePath("twice"), nil).want(t, 404)
	if first != second || deletes != 1 {
		t.Fatalf("a second DELETE while the create is pending queues another delete operation (%d delete operations; server/computes.go queueComputeDelete looks only at the first pending operation of the target, which is the create)", deletes)
	}
}

func TestListNodesAndKeys(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("nodes", computeBody())
	r := h.do("POST", computePath("nodes")+"/listNodes", nil).want(t, 200)
	var raw map[string]json.RawMessage
	r.json(t, &raw)
	if string(raw["nodes"]) != "[]" || len(raw) != 1 {
		t.Errorf("listNodes body %s, want {\"nodes\":[]}", r.Body)
	}
	h.do("GET", computePath("nodes")+"/listNodes", nil).want(t, 200)
	h.do("POST", computePath("nosuch")+"/listNodes", nil).want(t, 404, "ResourceNotFound")
	h.do("POST", computePath("nodes")+"/listNodes?$skip=-1", nil).want(t, 400)

	// listKeys without credentials: just the compute type (the
	// VirtualMachine variant, the one SDKs decode).
	var sec api.ComputeSecrets
	h.do("POST", computePath("nodes")+"/listKeys", nil).want(t, 200).json(t, &sec)
	if sec.ComputeType != "VirtualMachine" || sec.UserAccountCredentials != nil || sec.AdministratorAccount != nil {
		t.Errorf("listKeys %+v", sec)
	}
	h.do("POST", computePath("nosuch")+"/listKeys", nil).want(t, 404, "ResourceNotFound")
}

func TestAdminPasswordNeverLeaks(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const password = "Pa55-w0rd-Zebra-Quokka!"
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2mXG0 user@host"
	withCreds := func(user, pw string) func(m map[string]any) {
		return func(m map[string]any) {
			c := map[string]any{"adminUserName": user, "adminUserSshPublicKey": key}
			if pw != "" {
				c["adminUserPassword"] = pw
			}
			inner(m)["userAccountCredentials"] = c
		}
	}
	r := h.do("PUT", computePath("secret-c"), computeBody(withCreds("azureuser", password))).want(t, 201)
	var seen [][]byte
	seen = append(seen, r.Body)
	h.waitOp(r.Header.Get("Azure-AsyncOperation"))

	r = h.do("GET", computePath("secret-c"), nil).want(t, 200)
	seen = append(seen, r.Body)
	c := r.compute(t)
	if u := c.Aml().UserAccountCredentials; u == nil || u.AdminUserName != "azureuser" || u.AdminUserSSHPublicKey != key || u.AdminUserPassword != "" {
		t.Errorf("GET credentials %+v", u)
	}
	seen = append(seen, h.do("GET", hWSPath+"/computes", nil).want(t, 200).Body)
	seen = append(seen, h.do("PATCH", computePath("secret-c"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`).want(t, 200).Body)

	var sec api.ComputeSecrets
	h.do("POST", computePath("secret-c")+"/listKeys", nil).want(t, 200).json(t, &sec)
	if sec.UserAccountCredentials == nil || sec.UserAccountCredentials.AdminUserPassword != password || sec.UserAccountCredentials.AdminUserName != "azureuser" {
		t.Fatalf("listKeys %+v", sec.UserAccountCredentials)
	}
	if a := sec.AdministratorAccount; a == nil || a.Username != "azureuser" || a.Password != password || a.PublicKeyData != key {
		t.Fatalf("listKeys administratorAccount %+v, want the same credentials", a)
	}

	// A full PUT that repeats the user without a password keeps it.
	seen = append(seen, h.do("PUT", computePath("secret-c"), computeBody(withCreds("azureuser", ""))).want(t, 200).Body)
	sec = api.ComputeSecrets{}
	h.do("POST", computePath("secret-c")+"/listKeys", nil).want(t, 200).json(t, &sec)
	if sec.UserAccountCredentials == nil || sec.UserAccountCredentials.AdminUserPassword != password {
		t.Errorf("password lost by a PUT that did not change it: %+v", sec.UserAccountCredentials)
	}

	for i, b := range seen {
		if strings.Contains(string(b), password) {
			t.Errorf("response %d contains the admin password: %s", i, b)
		}
	}
	checkFilesLackSecret(t, h.dir, password)
	if strings.Contains(h.logs.String(), password) {
		t.Error("the server log contains the admin password")
	}

	// A different user without a password drops the stored one.
	h.do("PUT", computePath("secret-c"), computeBody(withCreds("otheruser", ""))).want(t, 200)
	sec = api.ComputeSecrets{}
	h.do("POST", computePath("secret-c")+"/listKeys", nil).want(t, 200).json(t, &sec)
	if sec.UserAccountCredentials == nil || sec.UserAccountCredentials.AdminUserPassword != "" || sec.UserAccountCredentials.AdminUserName != "otheruser" {
		t.Errorf("after changing the user: %+v", sec.UserAccountCredentials)
	}

	// Deleting the compute deletes its sealed secret.
	r = h.do("PUT", computePath("secret-d"), computeBody(withCreds("azureuser", password))).want(t, 201)
	h.waitOp(r.Header.Get("Azure-AsyncOperation"))
	id := computePath("secret-d")
	if _, err := store.GetSecret(context.Background(), h.db.Q(), id); err != nil {
		t.Fatalf("no sealed secret stored: %v", err)
	}
	r = h.do("DELETE", computePath("secret-d")+"?underlyingResourceAction=Delete", nil).want(t, 202)
	h.waitOp(r.Header.Get("Azure-AsyncOperation"))
	if _, err := store.GetSecret(context.Background(), h.db.Q(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("secret of a deleted compute still stored: %v", err)
	}
}

// checkFilesLackSecret reads every file of the data dir (the SQLite
// database, its WAL and shared memory) and asserts s is not in clear.
func checkFilesLackSecret(t *testing.T, dir, s string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "cumulus.db*"))
	if len(files) == 0 {
		t.Fatal("no database files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s) {
			t.Errorf("%s holds the admin password in clear", filepath.Base(f))
		}
	}
}

// TestHugeUnknownVMSize: an unknown vmSize of 256 KiB must be refused
// quickly and without echoing the megabyte back. catalog.Closest runs an
// edit distance against every catalog size (O(len) each), inside the
// store's write transaction, and the message quotes the whole value.
func TestHugeUnknownVMSize(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	body := `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"` + strings.Repeat("x", 256<<10) + `"}}}`
	start := time.Now()
	r := h.do("PUT", computePath("huge-size"), body).want(t, 400, "ValidationError")
	took := time.Since(start)
	h.do("GET", computePath("huge-size"), nil).want(t, 404)
	if len(r.Body) > 16<<10 {
		t.Fatalf("a 256 KiB unknown vmSize takes %v and answers a %d-byte error (api/compute_validate.go prepareSize: catalog.Closest on unbounded input inside the write transaction; message echoes the value)", took, len(r.Body))
	}
}

// TestNodesInViewsAndUsage puts node records in the store (as the
// clusters controller would) and checks what the API derives from them:
// listNodes paging (POST, then GET on an absolute nextLink), the node
// counts of the compute and the cores in the usages.
func TestNodesInViewsAndUsage(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	h.create("with-nodes", computeBody())
	h.create("lowpri", computeBody(func(m map[string]any) { inner(m)["vmPriority"] = "LowPriority" }))
	states := []string{"idle", "idle", "running", "preparing", "leaving", "unusable", "preempted"}
	now := time.Now()
	job := store.Job{UID: "job-1", Parent: hWSPath, Compute: computePath("with-nodes"), Created: now,
		Doc: api.Job{Name: "train-mnist", Properties: api.JobProperties{Command: "true", Status: api.JobRunning}}}
	if err := store.InsertJob(ctx, h.db.Q(), &job); err != nil {
		t.Fatal(err)
	}
	for i, st := range states {
		n := store.Node{ID: fmt.Sprintf("node-%d", i), Compute: computePath("with-nodes"), State: st, Priority: "Dedicated",
			VMSize: "Standard_DS2_v2", Provider: "test", Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 22, Created: now.Add(time.Duration(i) * time.Millisecond)}
		if st == "running" {
			n.JobID = "job-1"
		}
		if err := store.PutNode(ctx, h.db.Q(), n); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutNode(ctx, h.db.Q(), store.Node{ID: "lp-0", Compute: computePath("lowpri"), State: "idle", Priority: "LowPriority",
		VMSize: "Standard_DS2_v2", Provider: "test", Created: now}); err != nil {
		t.Fatal(err)
	}

	var all []api.NodeInfo
	method, link := "POST", computePath("with-nodes")+"/listNodes"
	for pages := 0; link != ""; pages++ {
		if pages > 5 {
			t.Fatal("listNodes paging does not end")
		}
		var page api.NodesPage
		h.do(method, link, nil).want(t, 200).json(t, &page)
		if len(page.Nodes) > hPageSize {
			t.Errorf("page of %d nodes", len(page.Nodes))
		}
		all = append(all, page.Nodes...)
		if page.NextLink != "" {
			h.absoluteLink(t, page.NextLink)
		}
		method, link = "GET", page.NextLink
	}
	if len(all) != len(states) {
		t.Fatalf("listNodes returned %d nodes, want %d", len(all), len(states))
	}
	for i, n := range all {
		if n.NodeID != fmt.Sprintf("node-%d", i) || n.NodeState != states[i] || n.PrivateIPAddress != fmt.Sprintf("10.0.0.%d", i+1) || n.Port != 22 {
			t.Errorf("node %d: %+v", i, n)
		}
		if (n.RunID != nil) != (states[i] == "running") || (n.RunID != nil && *n.RunID != "train-mnist") {
			t.Errorf("node %d runId %v; want the name of the job it runs", i, n.RunID)
		}
	}

	c := h.do("GET", computePath("with-nodes"), nil).want(t, 200).compute(t)
	a := c.Aml()
	want := api.NodeStateCounts{IdleNodeCount: 2, RunningNodeCount: 1, PreparingNodeCount: 1, LeavingNodeCount: 1, UnusableNodeCount: 1, PreemptedNodeCount: 1}
	if a.CurrentNodeCount != 7 || a.NodeStateCounts != want || a.AllocationState != "Resizing" {
		t.Errorf("counts %d %+v %s", a.CurrentNodeCount, a.NodeStateCounts, a.AllocationState)
	}
	var page api.Page[api.Compute]
	h.do("GET", hWSPath+"/computes", nil).want(t, 200).json(t, &page)
	for _, lc := range page.Value {
		if lc.Name == "with-nodes" && lc.Aml().CurrentNodeCount != 7 {
			t.Errorf("list shows %d nodes", lc.Aml().CurrentNodeCount)
		}
	}

	var usages api.Page[api.Usage]
	h.do("GET", hLocPath+"/usages", nil).want(t, 200).json(t, &usages)
	got := map[string]int64{}
	for _, u := range usages.Value {
		got[u.Name.Value] = u.CurrentValue
	}
	if got["TotalDedicatedCores"] != 14 || got["standardDSv2Family"] != 14 || got["TotalLowPriorityCores"] != 2 {
		t.Errorf("usage %v, want 7 dedicated DS2_v2 nodes = 14 cores and 1 low-priority = 2", got)
	}
	// Another location counts none of them.
	usages = api.Page[api.Usage]{}
	h.do("GET", "/subscriptions/"+hSub+"/providers/Microsoft.MachineLearningServices/locations/eastus/usages", nil).want(t, 200).json(t, &usages)
	for _, u := range usages.Value {
		if u.CurrentValue != 0 {
			t.Errorf("eastus usage %+v", u)
		}
	}
}
