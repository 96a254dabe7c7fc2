package server_test

import (
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// at is path with an explicit api-version.
func at(path, v string) string {
	if strings.Contains(path, "?") {
		return path + "&api-version=" + v
	}
	return path + "?api-version=" + v
}

// A client of each family runs the calls it has: workspace, compute
// create/get/list/patch/listKeys/delete, usages, VM sizes, quotas; and
// command jobs where the family has them.
func TestAPIVersionFamilies(t *testing.T) {
	for _, f := range server.APIFamilies() {
		t.Run(f.Name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			for _, v := range []string{f.Versions[0], f.Versions[len(f.Versions)-1]} {
				name := "c" + strings.ReplaceAll(strings.TrimSuffix(v, "-preview"), "-", "")
				h.do("GET", at(hWSPath, v), nil).want(t, 200)
				h.do("PATCH", at(hWSPath, v), map[string]any{"tags": map[string]string{"v": v}}).want(t, 200)
				r := h.do("PUT", at(computePath(name), v), computeBody()).want(t, 201)
				if op := r.Header.Get("Azure-AsyncOperation"); !strings.Contains(op, "api-version="+v) {
					t.Errorf("%s: operation URL %q does not carry the caller's api-version", v, op)
				}
				h.waitOp(r.Header.Get("Azure-AsyncOperation"))
				if c := h.do("GET", at(computePath(name), v), nil).want(t, 200).compute(t); c.Aml().ScaleSettings == nil {
					t.Errorf("%s: GET has no scaleSettings: %+v", v, c)
				}
				h.do("GET", at(hWSPath+"/computes", v), nil).want(t, 200)
				h.do("PATCH", at(computePath(name), v), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`).want(t, 200)
				h.do("POST", at(computePath(name)+"/listKeys", v), nil).want(t, 200)
				h.do("GET", at(hLocPath+"/usages", v), nil).want(t, 200)
				var sizes map[string][]api.VMSize
				h.do("GET", at(hLocPath+"/vmSizes", v), nil).want(t, 200).json(t, &sizes)
				if len(sizes["value"]) == 0 {
					t.Errorf("%s: no VM sizes under value", v)
				}
				if legacy := f.Name == "classic"; legacy != (len(sizes["amlCompute"]) == len(sizes["value"])) {
					t.Errorf("%s: amlCompute has %d sizes, value %d (the classic versions' clients read amlCompute)", v, len(sizes["amlCompute"]), len(sizes["value"]))
				}
				h.do("GET", at(hLocPath+"/quotas", v), nil).want(t, 200)
				job := h.do("PUT", at(hWSPath+"/jobs/j"+name, v), jobBody(name))
				if f.Jobs {
					job.want(t, 201)
					h.do("GET", at(hWSPath+"/jobs/j"+name, v), nil).want(t, 200)
				} else {
					job.want(t, 400, server.CodeNoRegisteredProvider)
					h.do("GET", at(hWSPath+"/jobs", v), nil).want(t, 400, server.CodeNoRegisteredProvider)
				}
			}
		})
	}
}

// The versions of every family are distinct, dated, and sorted within
// their family: one table, no version twice.
func TestAPIVersionTable(t *testing.T) {
	seen := map[string]string{}
	for _, f := range server.APIFamilies() {
		for i, v := range f.Versions {
			if !server.IsAPIVersionShape(v) {
				t.Errorf("%s: %q is not an api-version", f.Name, v)
			}
			if other, dup := seen[v]; dup {
				t.Errorf("%s is in both %s and %s", v, other, f.Name)
			}
			seen[v] = f.Name
			if i > 0 && v < f.Versions[i-1] {
				t.Errorf("%s: %s listed after %s", f.Name, v, f.Versions[i-1])
			}
		}
	}
	for _, v := range []string{"2018-11-19", "2022-10-01", "2022-10-01-preview", "2023-02-01-preview", "2024-04-01", "2025-12-01", "2026-03-15-preview"} {
		if seen[v] == "" {
			t.Errorf("%s, a version official clients send, is not accepted", v)
		}
	}
}

// A version that is missing, not a version, or never published is
// answered with ARM's codes and messages.
func TestAPIVersionErrors(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	auth := []string{"Authorization", "Bearer " + h.token}
	msg := func(r *resp) string {
		var e api.ErrorResponse
		r.json(t, &e)
		return e.Error.Message
	}
	r := h.raw("GET", hWSPath, nil, auth...).want(t, 400, api.CodeMissingAPIVersion)
	if m := msg(r); m != "The api-version query parameter (?api-version=) is required for all requests." {
		t.Errorf("missing: %q", m)
	}
	h.raw("GET", hWSPath+"?api-version=", nil, auth...).want(t, 400, api.CodeMissingAPIVersion)
	h.raw("PUT", computePath("nover"), computeBody(), auth...).want(t, 400, api.CodeMissingAPIVersion)
	h.do("GET", computePath("nover"), nil).want(t, 404)

	r = h.raw("GET", hWSPath+"?api-version=latest", nil, auth...).want(t, 400, api.CodeInvalidAPIVersion)
	if m := msg(r); !strings.HasPrefix(m, "The api-version 'latest' is invalid. The supported versions are '2018-03-01-preview, ") {
		t.Errorf("invalid: %q", m)
	}

	r = h.raw("GET", computePath("x")+"?api-version=2099-01-01", nil, auth...).want(t, 400, server.CodeNoRegisteredProvider)
	want := "No registered resource provider found for location 'westus2' and API version '2099-01-01' for type 'workspaces/computes'. The supported api-versions are '2018-03-01-preview, "
	if m := msg(r); !strings.HasPrefix(m, want) || !strings.Contains(m, "2026-03-15-preview'. The supported locations are 'westus2, ") {
		t.Errorf("unknown version:\n got %q\nwant %q…", m, want)
	}
	// An action reports its resource's type; a location's collection its own.
	r = h.raw("POST", computePath("x")+"/listKeys?api-version=2017-01-01", nil, auth...).want(t, 400, server.CodeNoRegisteredProvider)
	if m := msg(r); !strings.Contains(m, "for type 'workspaces/computes'.") {
		t.Errorf("action: %q", m)
	}
	r = h.raw("GET", hLocPath+"/usages?api-version=2017-01-01", nil, auth...).want(t, 400, server.CodeNoRegisteredProvider)
	if m := msg(r); !strings.Contains(m, "for type 'locations/usages'.") {
		t.Errorf("usages: %q", m)
	}
	// Jobs name only the versions that have them.
	r = h.raw("GET", hWSPath+"/jobs?api-version=2021-07-01", nil, auth...).want(t, 400, server.CodeNoRegisteredProvider)
	if m := msg(r); !strings.Contains(m, "for type 'workspaces/jobs'. The supported api-versions are '2022-02-01-preview, ") {
		t.Errorf("jobs: %q", m)
	}
}

// Workspace PATCH changes what it names, keeps the rest, refuses what
// Cumulus has no behaviour for, and changes nothing on bad input.
func TestWorkspacePatch(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.do("PATCH", hWSPath, map[string]any{"tags": map[string]string{"team": "vision"}, "properties": map[string]any{"description": "d1", "friendlyName": "Vision", "imageBuildCompute": nil}}).want(t, 200)
	var ws api.Workspace
	h.do("GET", hWSPath, nil).want(t, 200).json(t, &ws)
	if ws.Tags["team"] != "vision" || ws.Properties.Description != "d1" || ws.Properties.FriendlyName != "Vision" || ws.Location != hLoc {
		t.Fatalf("after PATCH: %+v", ws)
	}
	h.do("PATCH", hWSPath, map[string]any{"properties": map[string]any{"description": "d2"}}).want(t, 200).json(t, &ws)
	if ws.Tags["team"] != "vision" || ws.Properties.Description != "d2" || ws.Properties.FriendlyName != "Vision" {
		t.Errorf("a PATCH of the description changed more: %+v", ws)
	}
	h.do("PATCH", hWSPath, map[string]any{"properties": map[string]any{"description": "d3", "publicNetworkAccess": "Disabled"}}).want(t, 400, api.CodeValidationError)
	h.do("PATCH", hWSPath, map[string]any{"properties": map[string]any{"description": 7}}).want(t, 400, api.CodeValidationError)
	h.do("GET", hWSPath, nil).want(t, 200).json(t, &ws)
	if ws.Properties.Description != "d2" {
		t.Errorf("a refused PATCH changed the description to %q", ws.Properties.Description)
	}
	h.do("PATCH", hWSPath, map[string]any{"tags": map[string]string{"a": "b"}}, "If-Match", `"999"`).want(t, 412)
	h.do("PATCH", strings.Replace(hWSPath, hWS, "nosuch", 1), map[string]any{"tags": map[string]string{}}).want(t, 404, api.CodeNotFound)
}

// A workspace PATCH is a write: an operator who may scale computes, or a
// reader, may not change the workspace.
func TestWorkspacePatchNeedsWrite(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	op := h.user("olga", "ComputeOperator", hWSPath)
	reader := h.user("rita", "Reader", hWSPath)
	writer := h.user("carl", "Contributor", hWSPath)
	body := map[string]any{"tags": map[string]string{"who": "x"}}
	h.as(op, "PATCH", hWSPath, body).want(t, 403, api.CodeForbidden)
	h.as(reader, "PATCH", hWSPath, body).want(t, 403, api.CodeForbidden)
	h.create("opc", computeBody())
	h.as(op, "PATCH", computePath("opc"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":3}}}}`).want(t, 200)
	var ws api.Workspace
	h.as(writer, "PATCH", hWSPath, body).want(t, 200).json(t, &ws)
	if ws.Tags["who"] != "x" {
		t.Errorf("contributor's PATCH: %+v", ws.Tags)
	}
}

// User-assigned identities answer the api-versions of their own provider,
// Microsoft.ManagedIdentity, which the Azure SDKs and az identity send,
// and name their own type when a version is wrong.
func TestManagedIdentityAPIVersions(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	auth := []string{"Authorization", "Bearer " + h.token}
	path := "/subscriptions/" + hSub + "/resourceGroups/" + hRG + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"
	var u api.UserIdentity
	h.raw("PUT", at(path+"sdk", "2023-01-31"), map[string]any{"location": hLoc}, auth...).want(t, 201).json(t, &u)
	if u.Type != "Microsoft.ManagedIdentity/userAssignedIdentities" || u.Properties.ClientID == "" {
		t.Errorf("PUT at 2023-01-31: %+v", u)
	}
	h.raw("PUT", at(path+"sdk", "2018-11-30"), map[string]any{"location": hLoc, "tags": map[string]string{"a": "b"}}, auth...).want(t, 200)
	h.raw("GET", at(path+"sdk", "2024-11-30"), nil, auth...).want(t, 200)
	h.raw("GET", at(strings.TrimSuffix(path, "/"), "2022-01-31-preview"), nil, auth...).want(t, 200)

	var e api.ErrorResponse
	h.raw("PUT", at(path+"ml", "2024-04-01"), map[string]any{"location": hLoc}, auth...).want(t, 400, server.CodeNoRegisteredProvider).json(t, &e)
	if m := e.Error.Message; !strings.Contains(m, "API version '2024-04-01' for type 'userAssignedIdentities'. The supported api-versions are '2015-08-31-preview, 2018-11-30, ") ||
		strings.Contains(m, "2018-03-01-preview") {
		t.Errorf("an ML api-version on an identity: %q", m)
	}
	h.raw("GET", at(path+"ml", "latest"), nil, auth...).want(t, 400, api.CodeInvalidAPIVersion).json(t, &e)
	if m := e.Error.Message; !strings.Contains(m, "'2015-08-31-preview, 2018-11-30, 2021-09-30-preview, 2022-01-31-preview, 2023-01-31") {
		t.Errorf("not a version: %q", m)
	}
	// And the ML routes still refuse the identity's versions as ARM does.
	h.raw("GET", at(hWSPath, "2023-01-31"), nil, auth...).want(t, 400, server.CodeNoRegisteredProvider).json(t, &e)
	if !strings.Contains(e.Error.Message, "for type 'workspaces'") {
		t.Errorf("an identity api-version on a workspace: %q", e.Error.Message)
	}
}
