package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// KindQuota holds per-location quota limits set through updateQuotas.
const KindQuota = "quota"

// CodeLocationNotAvailable is Azure's code for a location a resource type
// is not offered in.
const CodeLocationNotAvailable = "LocationNotAvailableForResourceType"

// checkLocation refuses a location this server does not serve
// (Config.Locations): a made-up one would otherwise get computes, nodes
// and quota limits of its own, outside every configured limit.
func (s *Server) checkLocation(field, loc string) error {
	for _, l := range s.cfg.Locations {
		if strings.EqualFold(l, loc) {
			return nil
		}
	}
	return &api.Error{Status: http.StatusBadRequest, Code: CodeLocationNotAvailable, Target: field,
		Message: fmt.Sprintf("location %q is not served here; the available locations are: %s", loc, strings.Join(s.cfg.Locations, ", "))}
}

// CheckLocations checks a configured list of locations: names a path
// segment can hold, each once, and among them the default location.
func CheckLocations(locations []string, def string) error {
	if len(locations) == 0 {
		return nil
	}
	for i, l := range locations {
		if err := api.CheckSegment("location", l); err != nil {
			return err
		}
		for _, m := range locations[:i] {
			if strings.EqualFold(l, m) {
				return fmt.Errorf("location %q is listed twice", l)
			}
		}
	}
	for _, l := range locations {
		if strings.EqualFold(l, def) {
			return nil
		}
	}
	return fmt.Errorf("%s does not hold the default location %q", strings.Join(locations, ","), def)
}

func locationID(sub, loc string) string {
	return "/subscriptions/" + sub + "/providers/" + api.Provider + "/locations/" + loc
}

func (s *Server) listVMSizes(w http.ResponseWriter, r *http.Request, p params) error {
	if err := s.checkLocation("location", p["loc"]); err != nil {
		return err
	}
	out := api.VMSizeList{Value: []api.VMSize{}}
	for _, sz := range catalog.All() {
		out.Value = append(out.Value, api.VMSizeOf(sz))
	}
	if f := familyOf(r.URL.Query().Get("api-version")); f != nil && f.legacyVMSizes {
		out.AmlCompute = out.Value
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Limits reads the quota limits of a location: stored overrides over the
// server's defaults.
func (s *Server) Limits(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error) {
	l := quota.Limits{Family: map[string]int64{}, DefaultFam: s.cfg.Quotas.FamilyCores, Dedicated: s.cfg.Quotas.TotalCores, LowPriority: s.cfg.Quotas.LowPriorityCores}
	docs, err := store.List[api.QuotaUpdate](ctx, q, KindQuota, locationID(sub, loc), true, "", 10000)
	if err != nil {
		return l, err
	}
	for _, d := range docs {
		name := d.Value.ID[strings.LastIndex(d.Value.ID, "/")+1:]
		switch name {
		case quota.TotalDedicated:
			l.Dedicated = d.Value.Limit
		case quota.LowPriority:
			l.LowPriority = d.Value.Limit
		default:
			l.Family[name] = d.Value.Limit
		}
	}
	return l, nil
}

// computesIn lists the computes of a subscription that live in a location.
func (s *Server) computesIn(ctx context.Context, q store.Querier, sub, loc string) ([]api.Compute, error) {
	docs, err := store.List[api.Compute](ctx, q, store.KindCompute, "/subscriptions/"+sub, false, "", 1<<30)
	if err != nil {
		return nil, err
	}
	var out []api.Compute
	for _, d := range docs {
		if strings.EqualFold(d.Value.Properties.ComputeLocation, loc) {
			out = append(out, d.Value)
		}
	}
	return out, nil
}

// usageIn counts the cores of the nodes of every compute of the
// subscription that lives in the location.
func (s *Server) usageIn(ctx context.Context, q store.Querier, sub, loc string) (quota.Usage, error) {
	computes, err := s.computesIn(ctx, q, sub, loc)
	if err != nil {
		return quota.Usage{}, err
	}
	var nodes []quota.Node
	for _, c := range computes {
		ns, err := store.NodesOf(ctx, q, c.ID)
		if err != nil {
			return quota.Usage{}, err
		}
		for _, n := range ns {
			nodes = append(nodes, quota.Node{VMSize: n.VMSize, LowPriority: n.Priority == api.PriorityLowPriority})
		}
	}
	return quota.Count(nodes), nil
}

// minimumIn counts the cores that the minNodeCount of every compute of the
// subscription in the location holds (computes being deleted hold none).
func (s *Server) minimumIn(ctx context.Context, q store.Querier, sub, loc string) (quota.Usage, error) {
	computes, err := s.computesIn(ctx, q, sub, loc)
	if err != nil {
		return quota.Usage{}, err
	}
	u := quota.Usage{Family: map[string]int64{}}
	for _, c := range computes {
		if c.Properties.ProvisioningState == api.StateDeleting {
			continue
		}
		min, _, _ := c.Scale()
		u.Add(c.Aml().VMSize, c.Aml().VMPriority == api.PriorityLowPriority, min)
	}
	return u, nil
}

// checkMinimumQuota refuses a new compute whose minNodeCount alone needs
// more cores than are free now in its location.
func (s *Server) checkMinimumQuota(ctx context.Context, q store.Querier, sub string, c *api.Compute) error {
	min, _, _ := c.Scale()
	if min <= 0 {
		return nil
	}
	loc := c.Properties.ComputeLocation
	l, err := s.Limits(ctx, q, sub, loc)
	if err != nil {
		return err
	}
	u, err := s.usageIn(ctx, q, sub, loc)
	if err != nil {
		return err
	}
	a := c.Aml()
	need, ok := quota.NeedFor(l, u, a.VMSize, a.VMPriority == api.PriorityLowPriority, min)
	if !ok || need.Fits() {
		return nil
	}
	return api.Conflict(api.CodeQuotaExceeded, "compute %s: minNodeCount %d of %s exceeds the quota: %s; lower minNodeCount or raise the quota ('%s')",
		c.Name, min, need.Size, need.Describe(loc), quota.RaiseCommand(need.Quota, loc))
}

func (s *Server) listUsages(w http.ResponseWriter, r *http.Request, p params) error {
	sub, loc := p["sub"], p["loc"]
	if err := s.checkLocation("location", loc); err != nil {
		return err
	}
	l, err := s.Limits(r.Context(), s.db.Q(), sub, loc)
	if err != nil {
		return err
	}
	u, err := s.usageIn(r.Context(), s.db.Q(), sub, loc)
	if err != nil {
		return err
	}
	base := "/subscriptions/" + sub + "/usages"
	row := func(id, typ, name, display string, cur, limit int64) api.Usage {
		return api.Usage{ID: id, AmlWorkspaceLocation: loc, Type: typ, Unit: "Count", CurrentValue: cur, Limit: limit,
			Name: api.UsageName{Value: name, LocalizedValue: display}}
	}
	out := api.Page[api.Usage]{Value: []api.Usage{
		row(base, api.UsageTypeDedicated, quota.TotalDedicated, "Total Cluster Dedicated Regional vCPUs", u.Dedicated, l.Dedicated),
		row(base, api.UsageTypeLowPriority, quota.LowPriority, "Total Cluster LowPriority Regional vCPUs", u.LowPriority, l.LowPriority),
	}}
	for _, f := range quota.Families(l, u) {
		out.Value = append(out.Value, row(base+"/"+f, api.UsageTypeFamily, f, familyDisplay(f)+" Cluster Dedicated vCPUs", u.Family[f], l.FamilyLimit(f)))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func familyDisplay(f string) string {
	f = strings.TrimPrefix(strings.TrimPrefix(f, "standard"), "Standard")
	f = strings.TrimSuffix(f, "Family")
	return "Standard " + f + " Family"
}

func (s *Server) quotaRows(sub, loc string, l quota.Limits) []api.Quota {
	base := locationID(sub, loc) + "/quotas/"
	row := func(name, display string, limit int64) api.Quota {
		return api.Quota{ID: base + name, AmlWorkspaceLocation: loc, Type: api.QuotaType, Unit: "Count", Limit: limit,
			Name: api.UsageName{Value: name, LocalizedValue: display}}
	}
	out := []api.Quota{
		row(quota.TotalDedicated, "Total Cluster Dedicated Regional vCPUs", l.Dedicated),
		row(quota.LowPriority, "Total Cluster LowPriority Regional vCPUs", l.LowPriority),
	}
	for _, f := range quota.Families(l, quota.Usage{}) {
		out = append(out, row(f, familyDisplay(f)+" Cluster Dedicated vCPUs", l.FamilyLimit(f)))
	}
	return out
}

func (s *Server) listQuotas(w http.ResponseWriter, r *http.Request, p params) error {
	if err := s.checkLocation("location", p["loc"]); err != nil {
		return err
	}
	l, err := s.Limits(r.Context(), s.db.Q(), p["sub"], p["loc"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Page[api.Quota]{Value: s.quotaRows(p["sub"], p["loc"], l)})
	return nil
}

// updateQuotas sets limits. Each entry is answered with its own status, as
// Azure does; a bad entry changes nothing for itself and does not stop the
// others. Families may be named as in the size catalog (standardDSv2Family)
// or as Azure names their quotas (Standard_DSv2_Family_Cluster_Dedicated_vCPUs).
// A limit below the cores the minNodeCount of the location's clusters holds
// is refused with InvalidQuotaBelowClusterMinimum.
func (s *Server) updateQuotas(w http.ResponseWriter, r *http.Request, p params) error {
	var req api.QuotaUpdateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Value) == 0 {
		return api.BadRequest(api.CodeValidationError, "value must list at least one quota to update")
	}
	sub, loc := p["sub"], p["loc"]
	if err := s.checkLocation("location", loc); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	out := api.Page[api.QuotaUpdate]{Value: []api.QuotaUpdate{}}
	err := s.tx(r, func(q store.Querier) error {
		held, err := s.minimumIn(r.Context(), q, sub, loc)
		if err != nil {
			return err
		}
		for _, u := range req.Value {
			res := api.QuotaUpdate{ID: u.ID, Type: api.QuotaType, Limit: u.Limit, Unit: "Count"}
			canon, ok := quota.Canonical(u.ID[strings.LastIndex(u.ID, "/")+1:])
			switch {
			case !ok:
				res.Status = api.QuotaStatusInvalidFamily
			case u.Limit < 0 || u.Limit < minimumOf(held, canon):
				res.Status = api.QuotaStatusBelowMinimum
			default:
				res.ID = locationID(sub, loc) + "/quotas/" + canon
				if _, err := store.Put(r.Context(), q, KindQuota, locationID(sub, loc), canon, res, 0, now); err != nil {
					return err
				}
				res.Status = api.QuotaStatusSuccess
			}
			out.Value = append(out.Value, res)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.changed()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// minimumOf is the cores a quota must allow for the clusters' minimums.
func minimumOf(held quota.Usage, name string) int64 {
	switch name {
	case quota.TotalDedicated:
		return held.Dedicated
	case quota.LowPriority:
		return held.LowPriority
	}
	return held.Family[name]
}
