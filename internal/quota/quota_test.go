package quota

import (
	"reflect"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/catalog"
)

func TestCount(t *testing.T) {
	u := Count([]Node{
		{VMSize: "Standard_DS3_v2"},                    // 4, DSv2
		{VMSize: "standard_ds2_v2"},                    // 2, DSv2 (any case)
		{VMSize: "Standard_NC6s_v3"},                   // 6, NCSv3
		{VMSize: "Standard_DS3_v2", LowPriority: true}, // 4, low priority: no family, no dedicated
		{VMSize: "Standard_Bogus"},                     // unknown: not counted
	})
	want := Usage{Family: map[string]int64{"standardDSv2Family": 6, "standardNCSv3Family": 6}, Dedicated: 12, LowPriority: 4}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("Count = %+v, want %+v", u, want)
	}
	u.Add("Standard_DS3_v2", false, -1)
	u.Add("Standard_DS3_v2", true, 2)
	if u.Family["standardDSv2Family"] != 2 || u.Dedicated != 8 || u.LowPriority != 12 {
		t.Errorf("after Add: %+v", u)
	}
	var zero Usage
	zero.Add("Standard_D2_v2", false, 1)
	if zero.Family["standardDv2Family"] != 2 {
		t.Errorf("Add on a zero Usage: %+v", zero)
	}
	if c := Count(nil); c.Dedicated != 0 || c.LowPriority != 0 || c.Family == nil {
		t.Errorf("Count(nil) = %+v", c)
	}
}

func TestFamilyLimit(t *testing.T) {
	l := Limits{Family: map[string]int64{"standardNCSv3Family": 24, "standardDv2Family": 0}, DefaultFam: 100}
	for fam, want := range map[string]int64{"standardNCSv3Family": 24, "standardDv2Family": 0, "standardDSv2Family": 100} {
		if got := l.FamilyLimit(fam); got != want {
			t.Errorf("FamilyLimit(%s) = %d, want %d", fam, got, want)
		}
	}
	if got := (Limits{DefaultFam: 7}).FamilyLimit("x"); got != 7 {
		t.Errorf("nil map: %d", got)
	}
}

func TestHeadroom(t *testing.T) {
	l := Limits{Family: map[string]int64{"standardDSv2Family": 16}, DefaultFam: 100, Dedicated: 40, LowPriority: 10}
	tests := []struct {
		name      string
		u         Usage
		size      string
		low       bool
		want      int
		wantQuota string
	}{
		{"family binds", Usage{}, "Standard_DS3_v2", false, 4, "standardDSv2Family"},
		{"family partly used; remainder below one node rounds down", Count(nodes("Standard_DS2_v2", 3)), "Standard_DS3_v2", false, 2, "standardDSv2Family"},
		{"family full", Count(nodes("Standard_DS3_v2", 4)), "Standard_DS3_v2", false, 0, "standardDSv2Family"},
		{"family over its limit (lowered) counts as full", Count(nodes("Standard_DS3_v2", 5)), "Standard_DS3_v2", false, 0, "standardDSv2Family"},
		{"total binds across families", Count(nodes("Standard_NC6s_v3", 6)), "Standard_D4_v2", false, 0, TotalDedicated},
		{"total binds with room in the family", Count(nodes("Standard_NC6s_v3", 5)), "Standard_D3_v2", false, 2, TotalDedicated},
		{"low priority uses its own pool", Count(nodes("Standard_DS3_v2", 4)), "Standard_DS3_v2", true, 2, LowPriority},
		{"low priority pool shared by every family", Usage{LowPriority: 6}, "Standard_D2_v2", true, 2, LowPriority},
		{"unknown size", Usage{}, "Standard_Nope", false, 0, "unknown size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, q := Headroom(l, tt.u, tt.size, tt.low)
			if n != tt.want || q != tt.wantQuota {
				t.Errorf("Headroom = %d (%s), want %d (%s)", n, q, tt.want, tt.wantQuota)
			}
		})
	}
}

func nodes(size string, n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{VMSize: size}
	}
	return out
}

func TestNeedFor(t *testing.T) {
	l := Limits{Family: map[string]int64{"standardNCSv3Family": 24}, DefaultFam: 100, Dedicated: 30, LowPriority: 10}
	u := Count(nodes("Standard_NC6s_v3", 4)) // 24 cores: the NCSv3 family is full
	nd, ok := NeedFor(l, u, "Standard_NC6s_v3", false, 1)
	if !ok || nd.Quota != "standardNCSv3Family" || nd.Cores != 6 || nd.Free != 0 || nd.Limit != 24 || nd.Fits() {
		t.Errorf("family: %+v %v", nd, ok)
	}
	if got, want := nd.Describe("local"), "standardNCSv3Family needs 6 more cores, 0 of 24 free in location local"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	nd, _ = NeedFor(l, u, "Standard_DS3_v2", false, 2) // family has 100 free, total 6
	if nd.Quota != TotalDedicated || nd.Cores != 8 || nd.Free != 6 || nd.Limit != 30 || nd.Fits() {
		t.Errorf("total: %+v", nd)
	}
	if got, want := nd.Describe("eu"), "standardDSv2Family needs 8 more cores, 6 of 30 total dedicated cores free in location eu"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	nd, _ = NeedFor(l, u, "Standard_DS3_v2", true, 2)
	if nd.Quota != LowPriority || nd.Cores != 8 || nd.Free != 10 || !nd.Fits() {
		t.Errorf("low priority: %+v", nd)
	}
	if got, want := nd.Describe("eu"), "standardDSv2Family needs 8 more low-priority cores, 10 of 10 free in location eu"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if nd, _ := NeedFor(l, u, "Standard_DS3_v2", false, 0); !nd.Fits() {
		t.Errorf("no nodes always fit: %+v", nd)
	}
	if _, ok := NeedFor(l, u, "Standard_Nope", false, 1); ok {
		t.Error("unknown size accepted")
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"TotalDedicatedCores":                                  TotalDedicated,
		"totallowprioritycores":                                LowPriority,
		"standardDSv2Family":                                   "standardDSv2Family",
		"STANDARDDSV2FAMILY":                                   "standardDSv2Family",
		"Standard_DSv2_Family_Cluster_Dedicated_vCPUs":         "standardDSv2Family",
		"Standard DSv2 Family Cluster Dedicated vCPUs":         "standardDSv2Family",
		"Standard_NCSv3_Family_Cluster_Dedicated_vCPUs":        "standardNCSv3Family",
		"Standard_NCASv3_T4_Family_Cluster_Dedicated_vCPUs":    "standardNCASv3_T4Family",
		"Standard_NDAMSv4_A100_Family_Cluster_Dedicated_vCPUs": "standardNDAMSv4_A100Family",
	} {
		if got, ok := Canonical(in); !ok || got != want {
			t.Errorf("Canonical(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "Standard_Bogus_Family", "Standard_DSv2_Family_Cluster_LowPriority_vCPUs", "Family", "standard"} {
		if got, ok := Canonical(in); ok {
			t.Errorf("Canonical(%q) = %q, want not found", in, got)
		}
	}
	// Every catalog family has its own key, so the Azure spelling of one
	// never names another.
	seen := map[string]string{}
	for _, f := range catalog.Families() {
		k := familyKey(f)
		if other, dup := seen[k]; dup {
			t.Errorf("families %s and %s share the key %q", f, other, k)
		}
		seen[k] = f
	}
}

func TestFamilies(t *testing.T) {
	l := Limits{Family: map[string]int64{"customFamily": 4}}
	u := Usage{Family: map[string]int64{"usedFamily": 2}}
	got := Families(l, u)
	want := map[string]bool{"customFamily": true, "usedFamily": true}
	for _, f := range catalog.Families() {
		want[f] = true
	}
	if len(got) != len(want) {
		t.Fatalf("Families = %v", got)
	}
	for i, f := range got {
		if !want[f] || (i > 0 && got[i-1] >= f) {
			t.Errorf("Families not sorted and distinct: %v", got)
		}
	}
}
