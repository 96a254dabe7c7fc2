package sweep

import (
	"math"
	"reflect"
	"testing"
)

func space(t testing.TB, raw map[string]any) Space {
	t.Helper()
	sp, err := ParseSpace(raw)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestParseSpace(t *testing.T) {
	sp := space(t, map[string]any{
		"bs":  []any{"choice", []any{[]any{16.0, 32.0, 64.0}}},
		"lr":  []any{"loguniform", []any{-6.0, -1.0}},
		"n":   []any{"randint", []any{5.0}},
		"q":   []any{"quniform", []any{0.0, 10.0, 2.0}},
		"z":   []any{"qnormal", []any{10.0, 3.0, 1.0}},
		"opt": []any{"choice", []any{"adam", "sgd"}}, // values not wrapped in a list
	})
	if !reflect.DeepEqual(sp.Names, []string{"bs", "lr", "n", "opt", "q", "z"}) || len(sp.Dists["opt"].Values) != 2 || sp.Dists["n"].Upper != 5 {
		t.Fatalf("space: %+v", sp)
	}
	for _, bad := range []map[string]any{
		{},
		{"x": []any{"uniform", []any{1.0, 0.0}}},
		{"x": []any{"normal", []any{0.0, -1.0}}},
		{"x": []any{"quniform", []any{0.0, 1.0, 0.0}}},
		{"x": []any{"gamma", []any{1.0}}},
		{"x": []any{"randint", []any{2.5}}},
		{"x": []any{"randint", []any{1e300}}}, // before: grid made no trials, random drew -2.87e18
		{"x": []any{"randint", []any{float64(MaxRandintUpper) + 1}}},
		{"x": []any{"uniform", []any{0.0, math.Inf(1)}}},
		{"x": []any{"choice", []any{}}},
		{"x": "uniform(0, 1)"},
		{"x": []any{"uniform", []any{"a", 1.0}}},
	} {
		if _, err := ParseSpace(bad); err == nil {
			t.Errorf("ParseSpace(%v) took it", bad)
		}
	}
}

// TestDecodeEncode: every kind decodes [0, 1) into its range, and Encode
// finds the value again.
func TestDecodeEncode(t *testing.T) {
	sp := space(t, map[string]any{
		"c": []any{"choice", []any{[]any{"a", "b", "c"}}}, "r": []any{"randint", []any{4.0}},
		"u": []any{"uniform", []any{2.0, 4.0}}, "qu": []any{"quniform", []any{0.0, 10.0, 5.0}},
		"lu": []any{"loguniform", []any{math.Log(1e-4), math.Log(1e-1)}}, "qlu": []any{"qloguniform", []any{0.0, 3.0, 1.0}},
		"n": []any{"normal", []any{10.0, 2.0}}, "qn": []any{"qnormal", []any{10.0, 2.0, 0.5}},
		"ln": []any{"lognormal", []any{0.0, 1.0}}, "qln": []any{"qlognormal", []any{0.0, 1.0, 1.0}},
	})
	for _, u := range []float64{0, 0.1, 0.5, 0.9, 0.9999} {
		p := decode(sp, []float64{u, u, u, u, u, u, u, u, u, u})
		if f := p["u"].(float64); f < 2 || f >= 4 {
			t.Errorf("uniform(2,4) at %v: %v", u, f)
		}
		if f := p["lu"].(float64); f < 1e-4 || f > 1e-1 {
			t.Errorf("loguniform at %v: %v", u, f)
		}
		if f := p["qu"].(float64); math.Mod(f, 5) != 0 {
			t.Errorf("quniform(0,10,5) at %v: %v", u, f)
		}
		if f := p["qn"].(float64); math.Mod(f, 0.5) != 0 {
			t.Errorf("qnormal at %v: %v", u, f)
		}
		if f := p["ln"].(float64); f <= 0 {
			t.Errorf("lognormal at %v: %v", u, f)
		}
		if i := p["r"].(int); i < 0 || i > 3 {
			t.Errorf("randint(4) at %v: %v", u, i)
		}
		for _, name := range []string{"u", "n", "lu", "ln"} {
			if back, ok := sp.Dists[name].Encode(p[name]); !ok || math.Abs(back-u) > 1e-6 && u > 1e-6 {
				t.Errorf("%s: Encode(Decode(%v)) = %v", name, u, back)
			}
		}
	}
	if p := decode(sp, make([]float64, 10)); p["n"].(float64) > 0 {
		t.Errorf("normal(10, 2) at 0 is %v, want far below the mean", p["n"])
	}
	if got := Format(32.0) + " " + Format(0.001) + " " + Format("adam") + " " + Format(3); got != "32 0.001 adam 3" {
		t.Errorf("Format: %q", got)
	}
}

func TestGrid(t *testing.T) {
	sp := space(t, map[string]any{"a": []any{"choice", []any{[]any{1.0, 2.0}}}, "b": []any{"choice", []any{[]any{"x", "y", "z"}}}})
	if err := Check(sp, Grid); err != nil {
		t.Fatal(err)
	}
	if GridSize(sp) != 6 {
		t.Fatalf("grid size %d", GridSize(sp))
	}
	got := Next(Request{Space: sp, Algorithm: Algorithm{Type: Grid}, Issued: 4, N: 3})
	want := []Params{{"a": 2.0, "b": "y"}, {"a": 2.0, "b": "z"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("grid points 4…: %v, want %v", got, want)
	}
	if err := Check(space(t, map[string]any{"u": []any{"uniform", []any{0.0, 1.0}}}), Grid); err == nil {
		t.Error("grid took a uniform parameter")
	}
	if err := Check(space(t, map[string]any{"u": []any{"normal", []any{0.0, 1.0}}}), Bayesian); err == nil {
		t.Error("bayesian took a normal parameter")
	}
}

// TestRandomRepeatable: the same seed gives every trial index the same
// parameters however the trials are asked for; another seed others.
func TestRandomRepeatable(t *testing.T) {
	sp := space(t, map[string]any{"x": []any{"uniform", []any{0.0, 1.0}}, "y": []any{"choice", []any{[]any{1.0, 2.0, 3.0}}}})
	all := Next(Request{Space: sp, Algorithm: Algorithm{Type: Random, Seed: 7}, N: 6})
	later := Next(Request{Space: sp, Algorithm: Algorithm{Type: Random, Seed: 7}, Issued: 3, N: 3})
	if !reflect.DeepEqual(all[3:], later) {
		t.Errorf("trials 3… differ: %v vs %v", all[3:], later)
	}
	other := Next(Request{Space: sp, Algorithm: Algorithm{Type: Random, Seed: 8}, N: 6})
	if reflect.DeepEqual(all, other) {
		t.Error("seeds 7 and 8 gave the same trials")
	}
}

// peak is a smooth function of two parameters on [-1, 1]², largest (1)
// at (0.3, -0.2).
func peak(p Params) float64 {
	x, y := p["x"].(float64), p["y"].(float64)
	return math.Exp(-((x-0.3)*(x-0.3) + (y+0.2)*(y+0.2)) / 0.5)
}

// trialsToReach runs a sweep in rounds of `concurrent` trials, as a
// cluster of that many nodes would, and returns how many trials it took
// to reach a value of at least target (budget+1 if it never did).
func trialsToReach(sp Space, alg string, seed uint64, target float64, budget, concurrent int, f func(Params) float64) int {
	var done []Observation
	for len(done) < budget {
		ps := Next(Request{Space: sp, Algorithm: Algorithm{Type: alg, Seed: seed}, Maximize: true, Done: done, Issued: len(done), N: concurrent})
		for _, p := range ps {
			v := f(p)
			done = append(done, Observation{Params: p, Value: v})
			if v >= target {
				return len(done)
			}
		}
	}
	return budget + 1
}

// TestBayesianBeatsRandom: on a smooth 2-D function, Bayesian sampling
// reaches within 5 % of the optimum in fewer trials than random sampling,
// on average over seeds, three trials at a time. The figures are logged
// (go test -v -run TestBayesianBeatsRandom ./internal/sweep).
func TestBayesianBeatsRandom(t *testing.T) {
	sp := space(t, map[string]any{"x": []any{"uniform", []any{-1.0, 1.0}}, "y": []any{"uniform", []any{-1.0, 1.0}}})
	const seeds, budget, concurrent, target = 20, 120, 3, 0.95
	var sum = map[string]int{}
	var missed = map[string]int{}
	for seed := range uint64(seeds) {
		for _, alg := range []string{Random, Bayesian} {
			n := trialsToReach(sp, alg, seed+1, target, budget, concurrent, peak)
			sum[alg] += n
			if n > budget {
				missed[alg]++
			}
		}
	}
	meanR, meanB := float64(sum[Random])/seeds, float64(sum[Bayesian])/seeds
	t.Logf("trials to reach 95%% of the optimum of exp(-((x-0.3)²+(y+0.2)²)/0.5) on [-1,1]², %d at a time, mean over %d seeds (a miss counts %d): random %.1f (%d missed), bayesian %.1f (%d missed)",
		concurrent, seeds, budget+1, meanR, missed[Random], meanB, missed[Bayesian])
	if !(meanB < meanR) || missed[Bayesian] > 0 {
		t.Errorf("bayesian %.1f trials (%d missed), random %.1f: bayesian should need fewer and always arrive", meanB, missed[Bayesian], meanR)
	}
}

// TestBayesianPending: trials picked together, and those still running,
// are not picked again.
func TestBayesianPending(t *testing.T) {
	sp := space(t, map[string]any{"x": []any{"choice", []any{[]any{1.0, 2.0, 3.0, 4.0, 5.0}}}})
	var done []Observation
	for _, x := range []float64{1, 2, 3} {
		done = append(done, Observation{Params: Params{"x": x}, Value: x})
	}
	got := Next(Request{Space: sp, Algorithm: Algorithm{Type: Bayesian}, Maximize: true, Done: done, Pending: []Params{{"x": 5.0}}, Issued: 4, N: 1})
	if len(got) != 1 || got[0]["x"] != 4.0 {
		t.Errorf("next of 1,2,3 done and 5 running: %v, want x=4", got)
	}
}
