package sweep

import (
	"fmt"
	"math"
	"testing"
)

// bigRequest is a Bayesian pass late in a large sweep: a choice of 140,000
// values and a uniform, 900 trials done and 100 running, 10 to pick.
func bigRequest() Request {
	vals := make([]any, 140_000)
	for i := range vals {
		vals[i] = fmt.Sprintf("v%06d", i)
	}
	sp, err := ParseSpace(map[string]any{"c": []any{"choice", []any{vals}}, "x": []any{"uniform", []any{0.0, 1.0}}})
	if err != nil {
		panic(err)
	}
	r := Request{Space: sp, Algorithm: Algorithm{Type: Bayesian, Seed: 7}, Maximize: true, Issued: 1000, N: 10}
	for i := range 1000 {
		p := randomPoint(sp, 7, i)
		if i < 900 {
			x := p["x"].(float64)
			r.Done = append(r.Done, Observation{Params: p, Value: math.Sin(7*x) + float64(i%13)/13})
		} else {
			r.Pending = append(r.Pending, p)
		}
	}
	return r
}

// BenchmarkBayesianPass is one pass of the sweep controller over
// bigRequest: what one sweep may take of a control plane's CPU at a time.
func BenchmarkBayesianPass(b *testing.B) {
	r := bigRequest()
	b.ResetTimer()
	for range b.N {
		if got := Next(r); len(got) == 0 {
			b.Fatal("no trials")
		}
	}
}
