// Package catalog is the catalog of VM sizes: the sizes a cluster may use,
// with their shape and an hourly price — Azure's, and those of one's own
// hardware a sizes file adds (ParseSizes, Add). It does no I/O.
package catalog

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cumulus-ml/cumulus/internal/suggest"
)

// Size is one VM size of the catalog.
type Size struct {
	Name        string
	Family      string
	VCPUs       int
	MemoryGB    float64
	GPUs        int
	GPUModel    string
	LowPriority bool    // may be used by low-priority clusters
	Price       float64 // USD per hour, Linux, dedicated
	LowPrice    float64 // USD per hour, Linux, low priority
	OSDiskMB    int
	TempDiskMB  int
	PremiumIO   bool
}

// sizes are real Azure sizes; shapes from Azure's resource SKUs, prices are
// Linux pay-as-you-go list prices in USD per hour (approximate, East US).
var sizes = []Size{
	{"Standard_D2_v2", "standardDv2Family", 2, 7, 0, "", true, 0.146, 0.0292, 1047552, 102400, false},
	{"Standard_D3_v2", "standardDv2Family", 4, 14, 0, "", true, 0.293, 0.0586, 1047552, 204800, false},
	{"Standard_D4_v2", "standardDv2Family", 8, 28, 0, "", true, 0.585, 0.117, 1047552, 409600, false},
	{"Standard_DS2_v2", "standardDSv2Family", 2, 7, 0, "", true, 0.146, 0.0292, 1047552, 14336, true},
	{"Standard_DS3_v2", "standardDSv2Family", 4, 14, 0, "", true, 0.293, 0.0586, 1047552, 28672, true},
	{"Standard_DS4_v2", "standardDSv2Family", 8, 28, 0, "", true, 0.585, 0.117, 1047552, 57344, true},
	{"Standard_DS11_v2", "standardDSv2Family", 2, 14, 0, "", true, 0.185, 0.037, 1047552, 28672, true},
	{"Standard_DS12_v2", "standardDSv2Family", 4, 28, 0, "", true, 0.371, 0.0742, 1047552, 57344, true},
	{"Standard_D4s_v3", "standardDSv3Family", 4, 16, 0, "", true, 0.192, 0.0384, 1047552, 32768, true},
	{"Standard_D8s_v3", "standardDSv3Family", 8, 32, 0, "", true, 0.384, 0.0768, 1047552, 65536, true},
	{"Standard_E4s_v3", "standardESv3Family", 4, 32, 0, "", true, 0.252, 0.0504, 1047552, 65536, true},
	{"Standard_E8s_v3", "standardESv3Family", 8, 64, 0, "", true, 0.504, 0.1008, 1047552, 131072, true},
	{"Standard_F4s_v2", "standardFSv2Family", 4, 8, 0, "", true, 0.169, 0.0338, 1047552, 32768, true},
	{"Standard_F8s_v2", "standardFSv2Family", 8, 16, 0, "", true, 0.338, 0.0676, 1047552, 65536, true},
	{"Standard_NC6s_v3", "standardNCSv3Family", 6, 112, 1, "V100", true, 3.06, 0.612, 1047552, 344064, true},
	{"Standard_NC12s_v3", "standardNCSv3Family", 12, 224, 2, "V100", true, 6.12, 1.224, 1047552, 688128, true},
	{"Standard_NC24s_v3", "standardNCSv3Family", 24, 448, 4, "V100", true, 12.24, 2.448, 1047552, 1376256, true},
	{"Standard_NC4as_T4_v3", "standardNCASv3_T4Family", 4, 28, 1, "T4", true, 0.526, 0.1052, 1047552, 180224, true},
	{"Standard_NC8as_T4_v3", "standardNCASv3_T4Family", 8, 56, 1, "T4", true, 0.752, 0.1504, 1047552, 360448, true},
	{"Standard_NC64as_T4_v3", "standardNCASv3_T4Family", 64, 440, 4, "T4", true, 4.352, 0.8704, 1047552, 2883584, true},
	{"Standard_NC24ads_A100_v4", "standardNCADSA100v4Family", 24, 220, 1, "A100", true, 3.673, 0.7346, 1047552, 65536, true},
	{"Standard_NC48ads_A100_v4", "standardNCADSA100v4Family", 48, 440, 2, "A100", true, 7.346, 1.4692, 1047552, 131072, true},
	{"Standard_NC96ads_A100_v4", "standardNCADSA100v4Family", 96, 880, 4, "A100", true, 14.692, 2.9384, 1047552, 262144, true},
	{"Standard_ND96asr_v4", "standardNDASv4_A100Family", 96, 900, 8, "A100", true, 27.197, 5.4394, 1047552, 6291456, true},
	{"Standard_ND96amsr_A100_v4", "standardNDAMSv4_A100Family", 96, 1800, 8, "A100", true, 32.77, 6.554, 1047552, 6291456, true},
	{"Standard_ND40rs_v2", "standardNDSv2Family", 40, 672, 8, "V100", true, 22.032, 4.4064, 1047552, 2969600, true},
	{"Standard_NC40ads_H100_v5", "standardNCadsH100v5Family", 40, 320, 1, "H100", false, 6.98, 0, 1047552, 131072, true},
	{"Standard_ND96isr_H100_v5", "standardNDSH100v5Family", 96, 1900, 8, "H100", false, 98.32, 0, 1047552, 28991029, true},
}

// builtin is how many of the sizes are Azure's; sizes of one's own
// hardware (Add) follow them.
var builtin = len(sizes)

// table is the catalogue as lookups see it: replaced whole by Add.
type table struct {
	sizes   []Size
	byLower map[string]*Size
}

var current atomic.Pointer[table]

func init() { current.Store(newTable(sizes)) }

func newTable(all []Size) *table {
	t := &table{sizes: all, byLower: make(map[string]*Size, len(all))}
	for i := range all {
		t.byLower[strings.ToLower(all[i].Name)] = &all[i]
	}
	return t
}

// Lookup finds a size by name, ignoring case (Azure does too).
func Lookup(name string) (Size, bool) {
	s, ok := current.Load().byLower[strings.ToLower(name)]
	if !ok {
		return Size{}, false
	}
	return *s, true
}

// All returns every size, in catalog order: Azure's, then those of one's
// own hardware.
func All() []Size { return append([]Size(nil), current.Load().sizes...) }

// Families returns the distinct VM families, sorted.
func Families() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range current.Load().sizes {
		if !seen[s.Family] {
			seen[s.Family] = true
			out = append(out, s.Family)
		}
	}
	sort.Strings(out)
	return out
}

// HasFamily reports whether family (any case) is in the catalog, and its spelling there.
func HasFamily(family string) (string, bool) {
	for _, f := range Families() {
		if strings.EqualFold(f, family) {
			return f, true
		}
	}
	return "", false
}

// Closest returns up to n size names nearest to name, for "did you mean".
func Closest(name string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	q := strings.ToLower(name)
	var cs []cand
	for _, s := range current.Load().sizes {
		l := strings.ToLower(s.Name)
		d := suggest.Distance(q, l)
		if strings.Contains(l, q) || strings.Contains(q, strings.TrimPrefix(l, "standard_")) {
			d /= 2
		}
		cs = append(cs, cand{s.Name, d})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// HourlyPrice is the price of one node of the size, dedicated or low priority.
func (s Size) HourlyPrice(lowPriority bool) float64 {
	if lowPriority {
		return s.LowPrice
	}
	return s.Price
}
