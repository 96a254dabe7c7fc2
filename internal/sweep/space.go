// Package sweep holds the decisions of a sweep job, pure and
// deterministic: the search space and its distributions, which
// parameters the next trials get (grid, random with a seed, Bayesian
// optimization with a Gaussian process), and which running trials an
// early termination policy stops.
package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Distribution kinds, as Azure ML names them.
const (
	Choice      = "choice"
	Randint     = "randint"
	Uniform     = "uniform"
	QUniform    = "quniform"
	LogUniform  = "loguniform"
	QLogUniform = "qloguniform"
	Normal      = "normal"
	QNormal     = "qnormal"
	LogNormal   = "lognormal"
	QLogNormal  = "qlognormal"
)

// Kinds lists every distribution kind.
var Kinds = []string{Choice, Randint, Uniform, QUniform, LogUniform, QLogUniform, Normal, QNormal, LogNormal, QLogNormal}

// Dist is one parameter's distribution. Every distribution maps [0, 1]
// onto its values (Decode: the inverse of its cumulative distribution),
// so that random sampling and the Bayesian optimizer work on the unit
// cube whatever the distribution.
type Dist struct {
	Kind   string
	Values []any   // choice
	Upper  int     // randint: 0 … Upper-1
	Min    float64 // uniform kinds (the log of the bounds for the log kinds, as Azure's)
	Max    float64
	Mu     float64 // normal kinds (of the log for the log kinds)
	Sigma  float64
	Q      float64 // q kinds: values are rounded to multiples of Q

	index map[string]int // choice: a value's index by its text (Encode in one step)
}

// Space is a search space: a distribution per parameter.
type Space struct {
	Names []string // sorted
	Dists map[string]Dist
}

// Params are one trial's parameter values.
type Params map[string]any

// MaxRandintUpper bounds randint's upper: its values are 32-bit integers.
const MaxRandintUpper = 1 << 31

// ParseSpace reads a search space in the REST shape of 2024-04-01
// (searchSpace: {"lr": ["uniform", [0.01, 0.1]], "bs": ["choice", [[16, 32]]]}).

func ParseSpace(raw map[string]any) (Space, error) {
	sp := Space{Dists: map[string]Dist{}}
	if len(raw) == 0 {
		return sp, fmt.Errorf("searchSpace is empty; give at least one parameter, e.g. {\"lr\": [\"uniform\", [0.01, 0.1]]}")
	}
	for name, v := range raw {
		d, err := parseDist(v)
		if err != nil {
			return sp, fmt.Errorf("searchSpace.%s: %w", name, err)
		}
		sp.Names = append(sp.Names, name)
		sp.Dists[name] = d
	}
	slices.Sort(sp.Names)
	return sp, nil
}

func parseDist(v any) (Dist, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return Dist{}, fmt.Errorf("must be [\"<kind>\", [<arguments>]], e.g. [\"uniform\", [0, 1]]")
	}
	kind, _ := arr[0].(string)
	kind = strings.ToLower(kind)
	args, ok := arr[1].([]any)
	if !ok {
		return Dist{}, fmt.Errorf("the arguments of %s must be a list", kind)
	}
	nums := func(n int, names string) ([]float64, error) {
		if len(args) != n {
			return nil, fmt.Errorf("%s takes [%s]", kind, names)
		}
		out := make([]float64, n)
		for i, a := range args {
			f, ok := number(a)
			if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%s takes [%s] as finite numbers; %v is not one", kind, names, a)
			}
			out[i] = f
		}
		return out, nil
	}
	d := Dist{Kind: kind}
	switch kind {
	case Choice:
		vals := args
		if len(args) == 1 {
			if inner, ok := args[0].([]any); ok {
				vals = inner
			}
		}
		if len(vals) == 0 {
			return d, fmt.Errorf("choice needs at least one value")
		}
		d.Values = vals
		d.index = make(map[string]int, len(vals))
		for i, v := range vals {
			if _, dup := d.index[fmt.Sprint(v)]; !dup {
				d.index[fmt.Sprint(v)] = i
			}
		}
	case Randint:
		n, err := nums(1, "upper")
		if err != nil {
			return d, err
		}
		if n[0] < 1 || n[0] > MaxRandintUpper || n[0] != math.Trunc(n[0]) {
			return d, fmt.Errorf("randint's upper must be a whole number from 1 to %d, not %v", MaxRandintUpper, n[0])
		}
		d.Upper = int(n[0])
	case Uniform, LogUniform:
		n, err := nums(2, "min_value, max_value")
		if err != nil {
			return d, err
		}
		d.Min, d.Max = n[0], n[1]
	case QUniform, QLogUniform:
		n, err := nums(3, "min_value, max_value, q")
		if err != nil {
			return d, err
		}
		d.Min, d.Max, d.Q = n[0], n[1], n[2]
	case Normal, LogNormal:
		n, err := nums(2, "mu, sigma")
		if err != nil {
			return d, err
		}
		d.Mu, d.Sigma = n[0], n[1]
	case QNormal, QLogNormal:
		n, err := nums(3, "mu, sigma, q")
		if err != nil {
			return d, err
		}
		d.Mu, d.Sigma, d.Q = n[0], n[1], n[2]
	default:
		return d, fmt.Errorf("unknown distribution %q; use one of %s", arr[0], strings.Join(Kinds, ", "))
	}
	return d, d.check()
}

func (d Dist) check() error {
	switch d.Kind {
	case Uniform, LogUniform, QUniform, QLogUniform:
		if !(d.Min < d.Max) {
			return fmt.Errorf("%s needs min_value < max_value (%v, %v)", d.Kind, d.Min, d.Max)
		}
	case Normal, LogNormal, QNormal, QLogNormal:
		if !(d.Sigma > 0) {
			return fmt.Errorf("%s needs sigma > 0, not %v", d.Kind, d.Sigma)
		}
	}
	if strings.HasPrefix(d.Kind, "q") && !(d.Q > 0) {
		return fmt.Errorf("%s needs q > 0, not %v", d.Kind, d.Q)
	}
	return nil
}

// number reads a JSON or YAML number.
func number(a any) (float64, bool) {
	switch v := a.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// Discrete reports whether the distribution has a finite set of values.
func (d Dist) Discrete() bool { return d.Kind == Choice || d.Kind == Randint }

// Count is the number of values of a discrete distribution.
func (d Dist) Count() int {
	if d.Kind == Choice {
		return len(d.Values)
	}
	return d.Upper
}

// Decode is the value at u in [0, 1): the inverse of the distribution's
// cumulative distribution function, then rounded for the q kinds.
func (d Dist) Decode(u float64) any {
	u = min(max(u, 0), math.Nextafter(1, 0))
	switch d.Kind {
	case Choice:
		return d.Values[int(u*float64(len(d.Values)))]
	case Randint:
		return int(u * float64(d.Upper))
	case Uniform:
		return d.Min + u*(d.Max-d.Min)
	case QUniform:
		return d.quantize(d.Min + u*(d.Max-d.Min))
	case LogUniform:
		return math.Exp(d.Min + u*(d.Max-d.Min))
	case QLogUniform:
		return d.quantize(math.Exp(d.Min + u*(d.Max-d.Min)))
	}
	// The normal kinds: the inverse of Φ, kept off ±∞.
	u = min(max(u, 1e-9), 1-1e-9)
	z := d.Mu + d.Sigma*math.Sqrt2*math.Erfinv(2*u-1)
	switch d.Kind {
	case Normal:
		return z
	case QNormal:
		return d.quantize(z)
	case LogNormal:
		return math.Exp(z)
	default: // QLogNormal
		return d.quantize(math.Exp(z))
	}
}

// Encode is where value v lies in [0, 1] (Decode's inverse, at the middle
// of a discrete value's share); ok false when v is not a value of d.
func (d Dist) Encode(v any) (float64, bool) {
	switch d.Kind {
	case Choice:
		key := fmt.Sprint(v)
		if d.index != nil {
			i, ok := d.index[key]
			return (float64(i) + 0.5) / float64(len(d.Values)), ok
		}
		for i, c := range d.Values {
			if fmt.Sprint(c) == key {
				return (float64(i) + 0.5) / float64(len(d.Values)), true
			}
		}
		return 0, false
	case Randint:
		f, ok := number(v)
		return (f + 0.5) / float64(d.Upper), ok
	}
	f, ok := number(v)
	if !ok {
		return 0, false
	}
	switch d.Kind {
	case Uniform, QUniform:
		return clamp01((f - d.Min) / (d.Max - d.Min)), true
	case LogUniform, QLogUniform:
		if f <= 0 {
			return 0, true
		}
		return clamp01((math.Log(f) - d.Min) / (d.Max - d.Min)), true
	case LogNormal, QLogNormal:
		if f <= 0 {
			return 0, true
		}
		f = math.Log(f)
	}
	return 0.5 * (1 + math.Erf((f-d.Mu)/(d.Sigma*math.Sqrt2))), true
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

func (d Dist) quantize(x float64) float64 { return math.Round(x/d.Q) * d.Q }

// Format writes a parameter value as it goes into a command line: whole
// numbers without a decimal point, others in the shortest exact form.
func Format(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int:
		return strconv.Itoa(x)
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}
