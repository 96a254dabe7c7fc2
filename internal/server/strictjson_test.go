package server_test

import (
	"strings"
	"testing"
)

// TestAmbiguousJSONRefused: a body with a key twice in one object (which
// Go's decoder reads as the last, another reader as the first) or a
// number no float64 holds is a 400 wherever it is in the body, in a field
// Cumulus reads or not, and changes nothing (before: accepted).
func TestAmbiguousJSONRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, body := range []string{
		`{"location":"` + hLoc + `","location":"eastus"}`,
		`{"location":"` + hLoc + `","tags":{"team":"a","team":"b"}}`,
		`{"location":"` + hLoc + `","properties":{"description":"x","unknown":{"k":1,"k":2}}}`,
		`{"location":"` + hLoc + `","tags":{"n":"1"},"extra":1e999}`,
		`{"location":"` + hLoc + `","extra":[1,2,-1e400]}`,
	} {
		r := h.do("PUT", wsPath(hRG, "ambiguous"), body).want(t, 400, "InvalidRequestContent")
		if !strings.Contains(string(r.Body), "twice") && !strings.Contains(string(r.Body), "out of range") {
			t.Errorf("%s: %s does not say what is wrong", body, r.Body)
		}
	}
	h.do("GET", wsPath(hRG, "ambiguous"), nil).want(t, 404)
	// The same key in two objects, and large but finite numbers, are fine.
	h.do("PUT", wsPath(hRG, "ambiguous"), `{"location":"`+hLoc+`","tags":{"location":"x"},"extra":[1e308,{"a":1},{"a":2}]}`).want(t, 201)
}
