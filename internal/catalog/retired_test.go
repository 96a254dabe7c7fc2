package catalog

import "testing"

// Every retired size names a successor of the catalog with at least as
// many GPUs (a distributed job's ranks still fit), and is not itself a
// size of the catalog.
func TestRetiredSizesHaveSuccessors(t *testing.T) {
	gpus := map[string]int{"Standard_NC6": 1, "Standard_NC12": 2, "Standard_NC24": 4, "Standard_NC24r": 4,
		"Standard_NC6s_v2": 1, "Standard_NC12s_v2": 2, "Standard_NC24s_v2": 4, "Standard_NC24rs_v2": 4,
		"Standard_ND6s": 1, "Standard_ND12s": 2, "Standard_ND24s": 4, "Standard_ND24rs": 4}
	for _, r := range RetiredSizes() {
		if _, ok := Lookup(r.Name); ok {
			t.Errorf("%s is both retired and in the catalog", r.Name)
		}
		s, ok := Lookup(r.Successor)
		if !ok || s.GPUs < gpus[r.Name] || gpus[r.Name] == 0 {
			t.Errorf("%s (%d GPUs): successor %s has %d GPUs (in the catalog: %v)", r.Name, gpus[r.Name], r.Successor, s.GPUs, ok)
		}
	}
	if r, ok := RetiredSize("STANDARD_NC6"); !ok || r.Successor != "Standard_NC4as_T4_v3" {
		t.Errorf("STANDARD_NC6: %+v %v", r, ok)
	}
}
