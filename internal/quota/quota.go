// Package quota counts the cores clusters use against the limits of a
// location: dedicated cores per VM family, total dedicated cores, and one
// pool of low-priority cores. It is pure: callers bring nodes and limits.
package quota

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/catalog"
)

// Names of the location-wide quotas; family quotas use the family name.
const (
	TotalDedicated = "TotalDedicatedCores"
	LowPriority    = "TotalLowPriorityCores"
)

// Limits are the core limits of one location.
type Limits struct {
	Family      map[string]int64 // per VM family (catalog spelling); missing: DefaultFamily
	DefaultFam  int64
	Dedicated   int64
	LowPriority int64
}

// FamilyLimit is the limit for one family.
func (l Limits) FamilyLimit(family string) int64 {
	if v, ok := l.Family[family]; ok {
		return v
	}
	return l.DefaultFam
}

// Usage is cores in use in one location.
type Usage struct {
	Family      map[string]int64 // dedicated cores per family
	Dedicated   int64
	LowPriority int64
}

// Node is what counting needs to know of a node.
type Node struct {
	VMSize      string
	LowPriority bool
}

// Count adds up the cores of nodes.
func Count(nodes []Node) Usage {
	u := Usage{Family: map[string]int64{}}
	for _, n := range nodes {
		u.Add(n.VMSize, n.LowPriority, 1)
	}
	return u
}

// Add counts n more (or fewer) nodes of a size.
func (u *Usage) Add(size string, lowPriority bool, n int) {
	s, ok := catalog.Lookup(size)
	if !ok {
		return
	}
	cores := int64(s.VCPUs * n)
	if lowPriority {
		u.LowPriority += cores
		return
	}
	if u.Family == nil {
		u.Family = map[string]int64{}
	}
	u.Family[s.Family] += cores
	u.Dedicated += cores
}

// Headroom is how many more nodes of a size fit within the limits, given
// the usage; the second value names the quota that binds.
func Headroom(l Limits, u Usage, size string, lowPriority bool) (int, string) {
	s, ok := catalog.Lookup(size)
	if !ok || s.VCPUs == 0 {
		return 0, "unknown size"
	}
	per := int64(s.VCPUs)
	if lowPriority {
		return int(max(0, l.LowPriority-u.LowPriority) / per), LowPriority
	}
	fam := max(0, l.FamilyLimit(s.Family)-u.Family[s.Family]) / per
	tot := max(0, l.Dedicated-u.Dedicated) / per
	if fam <= tot {
		return int(fam), s.Family
	}
	return int(tot), TotalDedicated
}

// Need is what n more nodes of a size ask of a location's quotas, against
// the quota that binds: the size's family or the total dedicated cores
// (whichever has fewer cores free), or the low-priority pool.
type Need struct {
	Size        string
	Family      string // the size's family
	LowPriority bool
	Quota       string // the binding quota: Family, TotalDedicated or LowPriority
	Cores       int64  // cores the nodes need
	Free        int64  // cores free under Quota (never negative)
	Limit       int64  // Quota's limit
}

// NeedFor returns what n more nodes of a size need; false for a size that
// is not in the catalog.
func NeedFor(l Limits, u Usage, size string, lowPriority bool, n int) (Need, bool) {
	s, ok := catalog.Lookup(size)
	if !ok {
		return Need{}, false
	}
	nd := Need{Size: s.Name, Family: s.Family, LowPriority: lowPriority, Cores: int64(s.VCPUs) * int64(n)}
	if lowPriority {
		nd.Quota, nd.Limit, nd.Free = LowPriority, l.LowPriority, max(0, l.LowPriority-u.LowPriority)
		return nd, true
	}
	fam := max(0, l.FamilyLimit(s.Family)-u.Family[s.Family])
	tot := max(0, l.Dedicated-u.Dedicated)
	if fam <= tot {
		nd.Quota, nd.Limit, nd.Free = s.Family, l.FamilyLimit(s.Family), fam
	} else {
		nd.Quota, nd.Limit, nd.Free = TotalDedicated, l.Dedicated, tot
	}
	return nd, true
}

// Fits reports whether the cores needed are free.
func (n Need) Fits() bool { return n.Cores <= n.Free }

// Describe says what is needed and what is free in a location, e.g.
// "standardDSv2Family needs 8 more cores, 4 of 8 free in location local".
func (n Need) Describe(location string) string {
	switch n.Quota {
	case LowPriority:
		return fmt.Sprintf("%s needs %d more low-priority cores, %d of %d free in location %s", n.Family, n.Cores, n.Free, n.Limit, location)
	case TotalDedicated:
		return fmt.Sprintf("%s needs %d more cores, %d of %d total dedicated cores free in location %s", n.Family, n.Cores, n.Free, n.Limit, location)
	}
	return fmt.Sprintf("%s needs %d more cores, %d of %d free in location %s", n.Family, n.Cores, n.Free, n.Limit, location)
}

// RaiseCommand is the CLI command that raises a quota (a family,
// TotalDedicated or LowPriority) in a location, for messages that say how
// to get past it.
func RaiseCommand(name, location string) string {
	flag := "--family " + name
	switch name {
	case TotalDedicated:
		flag = "--total"
	case LowPriority:
		flag = "--low-priority"
	}
	return fmt.Sprintf("cumulus quota update --location %s %s --limit CORES", location, flag)
}

// Canonical returns the spelling of a quota name that limits use: TotalDedicated,
// LowPriority or a catalog family. It accepts those in any case, and Azure's
// quota names for families ("Standard_DSv2_Family_Cluster_Dedicated_vCPUs",
// or its display form "Standard DSv2 Family Cluster Dedicated vCPUs").
func Canonical(name string) (string, bool) {
	for _, q := range []string{TotalDedicated, LowPriority} {
		if strings.EqualFold(name, q) {
			return q, true
		}
	}
	if f, ok := catalog.HasFamily(name); ok {
		return f, true
	}
	key := familyKey(name)
	if key == "" {
		return "", false
	}
	for _, f := range catalog.Families() {
		if familyKey(f) == key {
			return f, true
		}
	}
	return "", false
}

// familyKey reduces a family name to what tells families apart:
// "standardDSv2Family" and "Standard_DSv2_Family_Cluster_Dedicated_vCPUs"
// both become "dsv2".
func familyKey(name string) string {
	k := strings.ToLower(strings.NewReplacer("_", "", " ", "", "-", "").Replace(name))
	k = strings.TrimSuffix(k, "clusterdedicatedvcpus")
	k = strings.TrimPrefix(k, "standard")
	return strings.TrimSuffix(k, "family")
}

// Families lists the families that have a limit or a usage, sorted, plus
// every catalog family.
func Families(l Limits, u Usage) []string { return FamiliesWith(l, u, catalog.Families()...) }

// FamiliesWith lists, sorted and once each, the families that have a limit
// or a usage and the extra ones.
func FamiliesWith(l Limits, u Usage, extra ...string) []string {
	seen := map[string]bool{}
	for _, f := range extra {
		seen[f] = true
	}
	for f := range l.Family {
		seen[f] = true
	}
	for f := range u.Family {
		seen[f] = true
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
