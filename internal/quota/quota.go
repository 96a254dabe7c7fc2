// Package quota counts the cores clusters use against the limits of a
// location: dedicated cores per VM family, total dedicated cores, and one
// pool of low-priority cores. It is pure: callers bring nodes and limits.
package quota

import (
	"sort"

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

// Families lists the families that have a limit or a usage, sorted, plus
// every catalog family.
func Families(l Limits, u Usage) []string {
	seen := map[string]bool{}
	for _, f := range catalog.Families() {
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
