package sweep

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Bayesian optimization: a Gaussian process (Matérn 5/2 kernel on the
// unit cube, its length scale picked by marginal likelihood) models the
// primary metric; each new trial goes where the expected improvement
// over the best value so far is largest. Running trials count as
// observed at the mean so far (the "constant liar"), so that trials
// picked together spread out.

// bayesInitial is how many random trials start a Bayesian sweep.
func bayesInitial(dims int) int { return max(3, dims+2) }

// Bounds on one pass's work, whatever the sweep's size: a pass picks at
// most MaxBayesianPerPass trials (the next pass picks the rest), and the
// model of each sees at most modelDone finished trials (the best half and
// the latest half of them) and modelPending running ones (the latest).
// Fitting is cubic and each of the candidates quadratic in the points
// modelled, so a pass costs the same for a sweep of 20 trials or 10,000.
const (
	MaxBayesianPerPass = 8
	modelDone          = 192
	modelPending       = 64
)

func nextBayesian(r Request) []Params {
	sp := r.Space
	var xs [][]float64
	var ys []float64
	for _, o := range r.Done {
		x, ok := encode(sp, o.Params)
		if !ok || math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
			continue
		}
		v := o.Value
		if !r.Maximize {
			v = -v
		}
		xs, ys = append(xs, x), append(ys, v)
	}
	xs, ys = modelled(xs, ys, modelDone)
	var pending [][]float64
	for _, p := range r.Pending[max(0, len(r.Pending)-modelPending):] {
		if x, ok := encode(sp, p); ok {
			pending = append(pending, x)
		}
	}
	rng := rand.New(rand.NewPCG(r.Algorithm.Seed, uint64(r.Issued)|1<<40))
	var out []Params
	for i := range min(r.N, MaxBayesianPerPass) {
		if len(xs) < bayesInitial(len(sp.Names)) {
			// Too few results to model: the random trial of this index.
			p := randomPoint(sp, r.Algorithm.Seed, r.Issued+i)
			out = append(out, p)
			x, _ := encode(sp, p)
			pending = append(pending, x)
			continue
		}
		x := suggest(sp, xs, ys, pending, rng)
		out = append(out, decode(sp, x))
		pending = append(pending, x)
	}
	return out
}

// modelled keeps at most n of the results (xs, ys): the best n/2 and the
// latest others, in their order.
func modelled(xs [][]float64, ys []float64, n int) ([][]float64, []float64) {
	if len(xs) <= n {
		return xs, ys
	}
	order := make([]int, len(ys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDesc(ys[a], ys[b]) })
	keep := make([]bool, len(ys))
	for _, i := range order[:n/2] {
		keep[i] = true
	}
	for i, left := len(ys)-1, n-n/2; i >= 0 && left > 0; i-- {
		if !keep[i] {
			keep[i], left = true, left-1
		}
	}
	var kx [][]float64
	var ky []float64
	for i := range ys {
		if keep[i] {
			kx, ky = append(kx, xs[i]), append(ky, ys[i])
		}
	}
	return kx, ky
}

func encode(sp Space, p Params) ([]float64, bool) {
	x := make([]float64, len(sp.Names))
	for i, name := range sp.Names {
		u, ok := sp.Dists[name].Encode(p[name])
		if !ok {
			return nil, false
		}
		x[i] = u
	}
	return x, true
}

func decode(sp Space, x []float64) Params {
	p := Params{}
	for i, name := range sp.Names {
		p[name] = sp.Dists[name].Decode(x[i])
	}
	return p
}

// snap moves x to where its values lie: the middle of a discrete value's
// share, the quantized value of a q kind.
func snap(sp Space, x []float64) []float64 {
	out := make([]float64, len(x))
	for i, name := range sp.Names {
		d := sp.Dists[name]
		u, _ := d.Encode(d.Decode(x[i]))
		out[i] = u
	}
	return out
}

// suggest returns the candidate of largest expected improvement.
func suggest(sp Space, xs [][]float64, ys []float64, pending [][]float64, rng *rand.Rand) []float64 {
	// Standardize the results; running trials are "observed" at the mean.
	mean, sd := meanSD(ys)
	n := len(xs) + len(pending)
	X := make([][]float64, 0, n)
	Y := make([]float64, 0, n)
	for i := range xs {
		X, Y = append(X, xs[i]), append(Y, (ys[i]-mean)/sd)
	}
	for _, p := range pending {
		X, Y = append(X, p), append(Y, 0)
	}
	gp := fitGP(X, Y)
	best := slices.Max(Y[:len(xs)])

	dims := len(sp.Names)
	var cands [][]float64
	for range 1500 {
		c := make([]float64, dims)
		for k := range c {
			c[k] = rng.Float64()
		}
		cands = append(cands, c)
	}
	// And around the best results so far.
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmpDesc(ys[a], ys[b]) })
	for _, i := range order[:min(5, len(order))] {
		for _, scale := range []float64{0.02, 0.05, 0.15} {
			for range 60 {
				c := make([]float64, dims)
				for k := range c {
					c[k] = clamp01(xs[i][k] + scale*rng.NormFloat64())
				}
				cands = append(cands, c)
			}
		}
	}
	var bestX []float64
	bestEI := math.Inf(-1)
	for _, c := range cands {
		c = snap(sp, c)
		if taken(c, X) {
			continue
		}
		mu, sigma := gp.predict(c)
		if ei := expectedImprovement(mu, sigma, best, 0.01); ei > bestEI {
			bestEI, bestX = ei, c
		}
	}
	if bestX == nil { // every candidate taken (a small discrete space)
		return snap(sp, cands[0])
	}
	return bestX
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func taken(c []float64, X [][]float64) bool {
	for _, x := range X {
		d := 0.0
		for k := range x {
			d += (x[k] - c[k]) * (x[k] - c[k])
		}
		if d < 1e-12 {
			return true
		}
	}
	return false
}

func meanSD(ys []float64) (float64, float64) {
	m := 0.0
	for _, y := range ys {
		m += y
	}
	m /= float64(len(ys))
	v := 0.0
	for _, y := range ys {
		v += (y - m) * (y - m)
	}
	sd := math.Sqrt(v / float64(len(ys)))
	if sd < 1e-12 {
		sd = 1
	}
	return m, sd
}

// expectedImprovement of a normal (mu, sigma) over best by at least xi.
func expectedImprovement(mu, sigma, best, xi float64) float64 {
	if sigma < 1e-12 {
		return max(mu-best-xi, 0)
	}
	z := (mu - best - xi) / sigma
	return (mu-best-xi)*normCDF(z) + sigma*normPDF(z)
}

func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
func normPDF(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }

// gp is a fitted Gaussian process with a unit signal variance.
type gp struct {
	X     [][]float64
	scale float64
	noise float64
	L     [][]float64 // Cholesky factor of K + noise·I
	alpha []float64   // (K + noise·I)⁻¹ y
}

// fitGP fits y over X, picking the length scale of largest marginal
// likelihood among a few.
func fitGP(X [][]float64, y []float64) *gp {
	var best *gp
	bestLL := math.Inf(-1)
	for _, scale := range []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2} {
		g := &gp{X: X, scale: scale, noise: 1e-4}
		ll, ok := g.fit(y)
		if ok && ll > bestLL {
			best, bestLL = g, ll
		}
	}
	if best == nil { // numerically hopeless: a wide, noisy model
		best = &gp{X: X, scale: 0.3, noise: 0.1}
		best.fit(y)
	}
	return best
}

func (g *gp) kernel(a, b []float64) float64 {
	d := 0.0
	for k := range a {
		d += (a[k] - b[k]) * (a[k] - b[k])
	}
	r := math.Sqrt(5*d) / g.scale
	return (1 + r + r*r/3) * math.Exp(-r)
}

// fit factors the kernel matrix and returns the log marginal likelihood.
func (g *gp) fit(y []float64) (float64, bool) {
	n := len(g.X)
	K := make([][]float64, n)
	for i := range K {
		K[i] = make([]float64, n)
		for j := range K[i] {
			K[i][j] = g.kernel(g.X[i], g.X[j])
		}
		K[i][i] += g.noise
	}
	L, ok := cholesky(K)
	if !ok {
		return 0, false
	}
	g.L = L
	g.alpha = backSolve(L, forwardSolve(L, y))
	ll := 0.0
	for i := range y {
		ll -= 0.5*y[i]*g.alpha[i] + math.Log(L[i][i])
	}
	return ll, true
}

func (g *gp) predict(x []float64) (mu, sigma float64) {
	k := make([]float64, len(g.X))
	for i := range g.X {
		k[i] = g.kernel(x, g.X[i])
		mu += k[i] * g.alpha[i]
	}
	v := forwardSolve(g.L, k)
	variance := 1.0
	for _, e := range v {
		variance -= e * e
	}
	return mu, math.Sqrt(max(variance, 1e-12))
}

func cholesky(A [][]float64) ([][]float64, bool) {
	n := len(A)
	L := make([][]float64, n)
	for i := range L {
		L[i] = make([]float64, n)
		for j := 0; j <= i; j++ {
			s := A[i][j]
			for k := 0; k < j; k++ {
				s -= L[i][k] * L[j][k]
			}
			if i == j {
				if s <= 0 {
					return nil, false
				}
				L[i][i] = math.Sqrt(s)
			} else {
				L[i][j] = s / L[j][j]
			}
		}
	}
	return L, true
}

// forwardSolve solves L x = b.
func forwardSolve(L [][]float64, b []float64) []float64 {
	x := make([]float64, len(b))
	for i := range b {
		s := b[i]
		for k := 0; k < i; k++ {
			s -= L[i][k] * x[k]
		}
		x[i] = s / L[i][i]
	}
	return x
}

// backSolve solves Lᵀ x = b.
func backSolve(L [][]float64, b []float64) []float64 {
	n := len(b)
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= L[k][i] * x[k]
		}
		x[i] = s / L[i][i]
	}
	return x
}
