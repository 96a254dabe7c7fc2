package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// KindQuota holds per-location quota limits set through updateQuotas.
const KindQuota = "quota"

func locationID(sub, loc string) string {
	return "/subscriptions/" + sub + "/providers/" + api.Provider + "/locations/" + loc
}

func (s *Server) listVMSizes(w http.ResponseWriter, r *http.Request, p params) error {
	out := api.VMSizeList{Value: []api.VMSize{}}
	for _, sz := range catalog.All() {
		out.Value = append(out.Value, api.VMSizeOf(sz))
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

// usageIn counts the cores of the nodes of every compute of the
// subscription that lives in the location.
func (s *Server) usageIn(ctx context.Context, q store.Querier, sub, loc string) (quota.Usage, error) {
	computes, err := store.List[api.Compute](ctx, q, store.KindCompute, "/subscriptions/"+sub, false, "", 1<<30)
	if err != nil {
		return quota.Usage{}, err
	}
	var nodes []quota.Node
	for _, c := range computes {
		if !strings.EqualFold(c.Value.Properties.ComputeLocation, loc) {
			continue
		}
		ns, err := store.NodesOf(ctx, q, c.Value.ID)
		if err != nil {
			return quota.Usage{}, err
		}
		for _, n := range ns {
			nodes = append(nodes, quota.Node{VMSize: n.VMSize, LowPriority: n.Priority == api.PriorityLowPriority})
		}
	}
	return quota.Count(nodes), nil
}

func (s *Server) listUsages(w http.ResponseWriter, r *http.Request, p params) error {
	sub, loc := p["sub"], p["loc"]
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
	l, err := s.Limits(r.Context(), s.db.Q(), p["sub"], p["loc"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Page[api.Quota]{Value: s.quotaRows(p["sub"], p["loc"], l)})
	return nil
}

// updateQuotas sets limits. Each entry is answered with its own status, as
// Azure does; a bad entry changes nothing for itself and does not stop the others.
func (s *Server) updateQuotas(w http.ResponseWriter, r *http.Request, p params) error {
	var req api.QuotaUpdateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Value) == 0 {
		return api.BadRequest(api.CodeValidationError, "value must list at least one quota to update")
	}
	sub, loc := p["sub"], p["loc"]
	now := s.clock.Now().UTC()
	out := api.Page[api.QuotaUpdate]{Value: []api.QuotaUpdate{}}
	err := s.db.Tx(r.Context(), func(q store.Querier) error {
		for _, u := range req.Value {
			res := api.QuotaUpdate{ID: u.ID, Type: api.QuotaType, Limit: u.Limit, Unit: "Count"}
			name := u.ID[strings.LastIndex(u.ID, "/")+1:]
			canon, ok := name, name == quota.TotalDedicated || name == quota.LowPriority
			if !ok {
				canon, ok = catalog.HasFamily(name)
			}
			switch {
			case !ok:
				res.Status = api.QuotaStatusInvalidFamily
			case u.Limit < 0:
				res.Status = "InvalidQuotaBelowClusterMinimum"
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
