package sweep

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Sampling algorithms, as Azure ML names them (lower case).
const (
	Grid     = "grid"
	Random   = "random"
	Bayesian = "bayesian"
)

// Algorithm is how a sweep picks its trials' parameters.
type Algorithm struct {
	Type string // grid, random, bayesian
	// Seed makes random and Bayesian sampling repeatable: the same seed
	// and the same results give the same trials.
	Seed uint64
}

// Observation is a finished trial: its parameters and the value of the
// primary metric it reached.
type Observation struct {
	Params Params
	Value  float64
}

// Request is what Next decides from: the space, the algorithm and goal,
// what earlier trials gave, which are still running, and how many trials
// were issued so far.
type Request struct {
	Space     Space
	Algorithm Algorithm
	Maximize  bool
	Done      []Observation // trials with a value of the primary metric
	Pending   []Params      // trials issued that have no value (yet)
	Issued    int           // trials issued so far: the index of the next
	N         int           // how many trials to pick
}

// Check refuses a space the algorithm cannot sample: grid needs discrete
// parameters (choice, randint), Bayesian sampling takes choice, uniform
// and quniform only, as Azure ML's.
func Check(sp Space, alg string) error {
	for _, name := range sp.Names {
		d := sp.Dists[name]
		switch alg {
		case Grid:
			if !d.Discrete() {
				return fmt.Errorf("grid sampling takes choice and randint parameters only; %s is %s", name, d.Kind)
			}
		case Bayesian:
			if d.Kind != Choice && d.Kind != Uniform && d.Kind != QUniform {
				return fmt.Errorf("bayesian sampling takes choice, uniform and quniform parameters only; %s is %s", name, d.Kind)
			}
		case Random:
		default:
			return fmt.Errorf("unknown sampling algorithm %q; use grid, random or bayesian", alg)
		}
	}
	return nil
}

// GridSize is the number of points of a grid (every combination).
func GridSize(sp Space) int {
	n := 1
	for _, name := range sp.Names {
		n *= sp.Dists[name].Count()
		if n > 1<<30 {
			return 1 << 30
		}
	}
	return n
}

// Next picks the parameters of the next r.N trials; fewer when a grid
// has no more points, and at most MaxBayesianPerPass for Bayesian
// sampling (the next pass picks more).
func Next(r Request) []Params {
	var out []Params
	switch strings.ToLower(r.Algorithm.Type) {
	case Grid:
		for i := r.Issued; i < r.Issued+r.N && i < GridSize(r.Space); i++ {
			out = append(out, gridPoint(r.Space, i))
		}
	case Bayesian:
		out = nextBayesian(r)
	default:
		for i := r.Issued; i < r.Issued+r.N; i++ {
			out = append(out, randomPoint(r.Space, r.Algorithm.Seed, i))
		}
	}
	return out
}

// gridPoint is the i-th combination, the last parameter (by name)
// changing fastest.
func gridPoint(sp Space, i int) Params {
	p := Params{}
	for k := len(sp.Names) - 1; k >= 0; k-- {
		d := sp.Dists[sp.Names[k]]
		n := d.Count()
		p[sp.Names[k]] = d.Decode((float64(i%n) + 0.5) / float64(n))
		i /= n
	}
	return p
}

// randomPoint is trial i's parameters: a function of the seed and i
// alone, so that a sweep picked up again gives every trial the same.
func randomPoint(sp Space, seed uint64, i int) Params {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	p := Params{}
	for _, name := range sp.Names {
		p[name] = sp.Dists[name].Decode(rng.Float64())
	}
	return p
}
