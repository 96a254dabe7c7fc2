package server

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The api-versions of Microsoft.MachineLearningServices that Cumulus
// accepts, grouped in families whose shapes for the resources Cumulus
// serves agree. Cumulus implements 2024-04-01; every published version of
// the resource provider, stable and preview, from 2018 on, is accepted for
// the resource types it already had. Within what Cumulus serves (workspaces,
// AmlCompute, usages, VM sizes, quotas, command jobs, environments) the
// older shapes are subsets of 2024-04-01's (an older client ignores the
// fields its version lacks and never sends them) but for one list: the
// classic versions list VM sizes under "amlCompute", not "value"
// (legacyVMSizes). Where a family lacks a resource type (command jobs
// before 2022), a request answers as Azure does for an api-version the
// type was never published in.

// apiFamily is a group of api-versions and the resource types they serve.
type apiFamily struct {
	name     string
	versions []string
	// jobs: the family has the command job, environment and code asset
	// shapes of 2024-04-01 (the "v2" jobs API).
	jobs bool
	// legacyVMSizes: the VM size list is {"amlCompute": […]}, as the
	// 2018–2019 specifications publish it; since it is not known in which
	// classic version "value" replaced it, the family's answer has both.
	legacyVMSizes bool
}

// apiFamilies is the one table of accepted api-versions, oldest first.
var apiFamilies = []apiFamily{
	{
		// Workspaces and the compute API (AmlCompute, usages, VM sizes,
		// quotas) as first published; jobs were the older "run" service.
		name: "classic",
		versions: []string{
			"2018-03-01-preview", "2018-11-19", "2019-05-01", "2019-06-01", "2019-11-01",
			"2020-01-01", "2020-02-18-preview", "2020-03-01", "2020-04-01", "2020-04-01-preview",
			"2020-05-01-preview", "2020-05-15-preview", "2020-06-01", "2020-08-01", "2020-09-01-preview",
			"2021-01-01", "2021-03-01-preview", "2021-04-01", "2021-07-01", "2022-01-01-preview",
		},
		legacyVMSizes: true,
	},
	{
		// The v2 jobs API arrives (command jobs, environments, code);
		// azure-ai-ml 1.x and the 2022 management SDKs speak these.
		name: "v2-2022",
		versions: []string{
			"2022-02-01-preview", "2022-05-01", "2022-06-01-preview", "2022-10-01", "2022-10-01-preview",
			"2022-12-01-preview", "2023-02-01-preview",
		},
		jobs: true,
	},
	{
		// The shape Cumulus implements (2024-04-01) and its neighbours.
		name: "current",
		versions: []string{
			"2023-04-01", "2023-04-01-preview", "2023-06-01-preview", "2023-08-01-preview", "2023-10-01",
			"2024-01-01-preview", "2024-04-01", "2024-04-01-preview", "2024-07-01-preview", "2024-10-01",
			"2024-10-01-preview", "2025-01-01-preview", "2025-04-01", "2025-04-01-preview", "2025-06-01",
			"2025-07-01-preview", "2025-09-01", "2025-10-01-preview", "2025-12-01", "2026-03-15-preview",
		},
		jobs: true,
	},
}

// apiVersionShape is how ARM recognizes an api-version: a date, optionally
// with a suffix such as -preview. Anything else is not a version at all.
var apiVersionShape = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-[A-Za-z0-9]+)?$`)
})

// familyOf returns the family of an api-version, or nil.
func familyOf(v string) *apiFamily {
	for i := range apiFamilies {
		if slices.Contains(apiFamilies[i].versions, v) {
			return &apiFamilies[i]
		}
	}
	return nil
}

// resourceType is the ARM resource type a route pattern addresses
// ("workspaces", "workspaces/computes", "locations/usages",
// "userAssignedIdentities", …) and its provider namespace: the literal
// segments after the namespace, less a trailing action (listKeys,
// cancel, …), which ARM reports as its resource's type.
func resourceType(pattern string) (namespace, typ string) {
	segs := strings.Split(strings.Trim(pattern, "/"), "/")
	i := slices.IndexFunc(segs, func(x string) bool { return strings.EqualFold(x, "providers") })
	if i < 0 || i+1 >= len(segs) {
		return api.Provider, "workspaces"
	}
	var out []string
	for j := i + 2; j < len(segs); j += 2 {
		named := j+1 < len(segs) && strings.HasPrefix(segs[j+1], "{")
		if !named && len(out) > 0 && !collections[segs[j]] {
			break // an action on the resource named so far
		}
		out = append(out, segs[j])
	}
	return segs[i+1], strings.Join(out, "/")
}

// collections are the trailing path segments that list a resource type
// rather than act on one.
var collections = map[string]bool{
	"workspaces": true, "computes": true, "jobs": true, "environments": true, "versions": true,
	"codes": true, "data": true, "datastores": true, "usages": true, "vmSizes": true, "quotas": true, "userAssignedIdentities": true,
}

// jobsType reports whether a resource type is part of the v2 jobs API.
func jobsType(t string) bool {
	switch t {
	case "workspaces/jobs", "workspaces/environments", "workspaces/environments/versions",
		"workspaces/codes", "workspaces/codes/versions", "workspaces/data", "workspaces/data/versions", "workspaces/datastores":
		return true
	}
	return false
}

// supportedFor lists the api-versions that serve a resource type.
func supportedFor(t string) []string {
	var out []string
	for _, f := range apiFamilies {
		if jobsType(t) && !f.jobs {
			continue
		}
		out = append(out, f.versions...)
	}
	return out
}

// managedIdentityVersions are the published api-versions of
// Microsoft.ManagedIdentity, whose userAssignedIdentities shape (id,
// name, type, location, tags; principalId, clientId, tenantId) Cumulus
// serves: the Azure SDKs and az identity send one of them (2023-01-31
// today, 2018-11-30 from older clients).
var managedIdentityVersions = []string{
	"2015-08-31-preview", "2018-11-30", "2021-09-30-preview", "2022-01-31-preview", "2023-01-31",
	"2023-07-31-preview", "2024-11-30", "2025-01-31-preview",
}

// checkAPIVersion answers a request's api-version for a resource type as
// ARM does: missing, not a version, or a version the resource provider
// never published for that type.
func (s *Server) checkAPIVersion(pattern, v, location string) error {
	if v == "" {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeMissingAPIVersion,
			Message: "The api-version query parameter (?api-version=) is required for all requests."}
	}
	ns, t := resourceType(pattern)
	supported := supportedFor(t)
	published := func() bool { f := familyOf(v); return f != nil && (f.jobs || !jobsType(t)) }
	if strings.EqualFold(ns, api.ManagedIdentityProvider) {
		supported = managedIdentityVersions
		published = func() bool { return slices.Contains(managedIdentityVersions, v) }
	}
	if !apiVersionShape().MatchString(v) {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidAPIVersion,
			Message: "The api-version '" + v + "' is invalid. The supported versions are '" + strings.Join(supported, ", ") + "'."}
	}
	if published() {
		return nil
	}
	return &api.Error{Status: http.StatusBadRequest, Code: CodeNoRegisteredProvider,
		Message: "No registered resource provider found for location '" + strings.ToLower(location) +
			"' and API version '" + v + "' for type '" + t + "'. The supported api-versions are '" +
			strings.Join(supported, ", ") + "'. The supported locations are '" + strings.Join(s.cfg.Locations, ", ") + "'."}
}

// CodeNoRegisteredProvider is ARM's code for an api-version (or path) the
// resource provider does not serve.
const CodeNoRegisteredProvider = "NoRegisteredProviderFound"
