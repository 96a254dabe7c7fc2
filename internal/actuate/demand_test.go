package actuate

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/decide"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// Demand gives the history what it was told in time order, and at one
// time releases, then ready nodes, then arrivals: the same history as
// one fed in that order directly.
func TestDemandOrder(t *testing.T) {
	opt := decide.DefaultAdaptive()
	opt.MinSamples = 2
	const fallback = 2 * time.Minute

	var want decide.IdleHistory
	want.Policy(fallback, opt)
	for k := range 20 {
		base := 600 * k
		want.Release(at(base), 1)
		want.Provisioned(time.Duration(60+k) * time.Second)
		want.Arrive(at(base), 2, k%2)
		want.Arrive(at(base+30), 1, 0)
	}

	d := NewDemand(0)
	for k := 19; k >= 0; k-- { // newest first, kinds scrambled
		base := 600 * k
		d.Arrive(at(base+30), 1, 0)
		d.Arrive(at(base), 2, k%2)
		d.Ready(at(base), time.Duration(60+k)*time.Second)
		d.Release(at(base), 1)
	}
	d.Ready(at(0), -time.Second) // clocks that disagree: left out
	got := d.Policy(fallback, opt)

	if g, w := d.hist.Provisioning(), want.Provisioning(); g != w {
		t.Errorf("provisioning %v; want %v", g, w)
	}
	gm, gf := d.hist.Missed()
	wm, wf := want.Missed()
	if gm != wm || gf != wf {
		t.Errorf("missed %d (fixed %d); want %d (%d)", gm, gf, wm, wf)
	}
	p := want.Policy(fallback, opt)
	for rank := range 4 {
		for _, idle := range []int{0, 15, 600} {
			n := &decide.Node{ID: "n", State: decide.NodeIdle, IdleSince: at(600*19 + 30 + idle)}
			if g, w := got.RemovableAt(n, rank), p.RemovableAt(n, rank); !g.Equal(w) {
				t.Errorf("rank %d, idle since +%ds: removable at %v; want %v", rank, idle, g.Sub(t0), w.Sub(t0))
			}
		}
	}
	if len(d.pending) != 0 {
		t.Errorf("%d events still pending after Policy", len(d.pending))
	}
}

// The fixed timeout that the history's replay holds the policy to is set
// before the arrivals it was told about are recorded.
func TestDemandFallbackBeforeArrivals(t *testing.T) {
	opt := decide.DefaultAdaptive()
	for _, fallback := range []time.Duration{0, time.Hour} {
		d := NewDemand(0)
		var want decide.IdleHistory
		want.Policy(fallback, opt)
		for k := range 10 {
			d.Arrive(at(300*k), 1, 0)
			want.Arrive(at(300*k), 1, 0)
			d.Release(at(300*k+60), 1)
			want.Release(at(300*k+60), 1)
		}
		d.Policy(fallback, opt)
		_, gf := d.hist.Missed()
		_, wf := want.Missed()
		if gf != wf {
			t.Errorf("fallback %v: %d arrivals miss under the fixed timeout; want %d", fallback, gf, wf)
		}
	}
}
