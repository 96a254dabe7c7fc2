package catalog

import "strings"

// Retired is a VM size Azure has retired: older documents and scripts
// still name it, and Azure creates no cluster of it any more. Successor is
// the size of the catalog to use instead: of the series Azure's migration
// guide points to, with as many GPUs, so that a job's ranks still fit.
type Retired struct {
	Name      string
	Series    string // the series and its GPU
	On        string // the day Azure retired it
	Successor string
}

// retiredSizes are the sizes of the retired GPU series (NC with K80, NCv2
// with P100, ND with P40: retired 6 September 2023) that ML documents of
// their time name, Standard_NC6 first among them.
var retiredSizes = []Retired{
	{"Standard_NC6", "NC-series (NVIDIA K80)", "2023-09-06", "Standard_NC4as_T4_v3"},
	{"Standard_NC12", "NC-series (NVIDIA K80)", "2023-09-06", "Standard_NC12s_v3"},
	{"Standard_NC24", "NC-series (NVIDIA K80)", "2023-09-06", "Standard_NC64as_T4_v3"},
	{"Standard_NC24r", "NC-series (NVIDIA K80)", "2023-09-06", "Standard_NC64as_T4_v3"},
	{"Standard_NC6s_v2", "NCv2-series (NVIDIA P100)", "2023-09-06", "Standard_NC6s_v3"},
	{"Standard_NC12s_v2", "NCv2-series (NVIDIA P100)", "2023-09-06", "Standard_NC12s_v3"},
	{"Standard_NC24s_v2", "NCv2-series (NVIDIA P100)", "2023-09-06", "Standard_NC24s_v3"},
	{"Standard_NC24rs_v2", "NCv2-series (NVIDIA P100)", "2023-09-06", "Standard_NC24s_v3"},
	{"Standard_ND6s", "ND-series (NVIDIA P40)", "2023-09-06", "Standard_NC24ads_A100_v4"},
	{"Standard_ND12s", "ND-series (NVIDIA P40)", "2023-09-06", "Standard_NC48ads_A100_v4"},
	{"Standard_ND24s", "ND-series (NVIDIA P40)", "2023-09-06", "Standard_NC96ads_A100_v4"},
	{"Standard_ND24rs", "ND-series (NVIDIA P40)", "2023-09-06", "Standard_NC96ads_A100_v4"},
}

// RetiredSize finds a retired size by name, ignoring case.
func RetiredSize(name string) (Retired, bool) {
	for _, r := range retiredSizes {
		if strings.EqualFold(r.Name, name) {
			return r, true
		}
	}
	return Retired{}, false
}

// RetiredSizes returns every retired size the catalog knows, in its order.
func RetiredSizes() []Retired { return append([]Retired(nil), retiredSizes...) }
