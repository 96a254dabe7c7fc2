// Package promtext writes metrics in Prometheus's text exposition format
// (version 0.0.4): counters and histograms fed as things happen, gauges
// read at scrape time, and the families of a scrape written in one body.
//
// It stands in for Prometheus's client library, whose package
// initialization (its default registry's Go and process collectors)
// costs every start of the cumulus binary about 2 ms of CPU — the CLI's
// and the agents' as much as the server's, though only the server serves
// metrics.
package promtext

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is a family's metric type.
type Kind string

// The metric types written here.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Family describes one metric family: its name, help, type and the names
// of its labels, in the order their values are given.
type Family struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []string
	order  []int // label indexes sorted by name: series are written so
}

// NewFamily describes a family.
func NewFamily(name, help string, kind Kind, labels ...string) *Family {
	f := &Family{Name: name, Help: help, Kind: kind, Labels: labels}
	f.order = make([]int, len(labels))
	for i := range f.order {
		f.order[i] = i
	}
	sort.SliceStable(f.order, func(i, k int) bool { return labels[f.order[i]] < labels[f.order[k]] })
	return f
}

// Collector adds its families' series to a scrape.
type Collector interface {
	// Families are the families it may write (a scrape shows a family
	// only when it has series).
	Families() []*Family
	// Collect adds the current series; an error fails the scrape.
	Collect(ctx context.Context, s *Scrape) error
}

// Registry is the collectors one exposition is made of.
type Registry struct {
	mu sync.Mutex
	cs []Collector
}

// Register adds collectors.
func (r *Registry) Register(cs ...Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cs = append(r.cs, cs...)
}

// Names are the names of every family the registry's collectors may
// write.
func (r *Registry) Names() []string {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	var out []string
	for _, c := range cs {
		for _, f := range c.Families() {
			out = append(out, f.Name)
		}
	}
	return out
}

// Append collects every collector and appends the exposition to b:
// families by name, each family's series by their labels' values.
func (r *Registry) Append(ctx context.Context, b []byte) ([]byte, error) {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	s := &Scrape{fams: map[string]*scraped{}}
	var errs []error
	for _, c := range cs {
		if err := c.Collect(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return b, err
	}
	return s.append(b), nil
}

// Scrape gathers the series of one exposition.
type Scrape struct {
	fams map[string]*scraped
}

type scraped struct {
	f      *Family
	series []series
}

// series is one line (or, for a histogram, its lines) with the sort key
// of its label values.
type series struct {
	key   string
	lines []byte
}

func (s *Scrape) family(f *Family) *scraped {
	sc := s.fams[f.Name]
	if sc == nil {
		sc = &scraped{f: f}
		s.fams[f.Name] = sc
	}
	return sc
}

// Add adds a counter's or a gauge's series of f with its label values.
// Label values beyond or short of f's labels are a programming error.
func (s *Scrape) Add(f *Family, v float64, values ...string) {
	mustMatch(f, values)
	labels := appendLabels(nil, f, values)
	line := appendSample(nil, f.Name, "", labels, "", v)
	sc := s.family(f)
	sc.series = append(sc.series, series{key: sortKey(f, values), lines: line})
}

// addHistogram adds a histogram's series: cumulative bucket counts, the
// sum and the count.
func (s *Scrape) addHistogram(f *Family, bounds []float64, counts []uint64, sum float64, count uint64, values []string) {
	labels := appendLabels(nil, f, values)
	var b []byte
	var cum uint64
	for i, ub := range bounds {
		cum += counts[i]
		b = appendSample(b, f.Name, "_bucket", labels, formatFloat(ub), float64(cum))
	}
	b = appendSample(b, f.Name, "_bucket", labels, "+Inf", float64(count))
	b = appendSample(b, f.Name, "_sum", labels, "", sum)
	b = appendSample(b, f.Name, "_count", labels, "", float64(count))
	sc := s.family(f)
	sc.series = append(sc.series, series{key: sortKey(f, values), lines: b})
}

func (s *Scrape) append(b []byte) []byte {
	for _, n := range slices.Sorted(maps.Keys(s.fams)) {
		sc := s.fams[n]
		b = append(b, "# HELP "...)
		b = append(b, n...)
		b = append(b, ' ')
		b = appendEscaped(b, sc.f.Help, false)
		b = append(b, "\n# TYPE "...)
		b = append(b, n...)
		b = append(b, ' ')
		b = append(b, sc.f.Kind...)
		b = append(b, '\n')
		sort.SliceStable(sc.series, func(i, k int) bool { return sc.series[i].key < sc.series[k].key })
		for _, se := range sc.series {
			b = append(b, se.lines...)
		}
	}
	return b
}

func mustMatch(f *Family, values []string) {
	if len(values) != len(f.Labels) {
		panic("promtext: " + f.Name + " has " + strconv.Itoa(len(f.Labels)) + " labels, given " + strconv.Itoa(len(values)) + " values")
	}
}

// sortKey orders series as Prometheus's client does: by label values,
// the labels taken by name.
func sortKey(f *Family, values []string) string {
	var b strings.Builder
	for _, i := range f.order {
		b.WriteString(values[i])
		b.WriteByte(0)
	}
	return b.String()
}

// appendLabels appends name="value" pairs, by label name, comma-separated.
func appendLabels(b []byte, f *Family, values []string) []byte {
	for n, i := range f.order {
		if n > 0 {
			b = append(b, ',')
		}
		b = AppendLabel(b, f.Labels[i], values[i])
	}
	return b
}

// appendSample appends one line: name+suffix{labels[,le="le"]} value.
func appendSample(b []byte, name, suffix string, labels []byte, le string, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) > 0 || le != "" {
		b = append(b, '{')
		b = append(b, labels...)
		if le != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, `le="`...)
			b = append(b, le...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = AppendFloat(b, v)
	return append(b, '\n')
}

// AppendLabel appends name="value" with the text format's escapes.
func AppendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped escapes a backslash and a newline, and in a label value
// a double quote.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendFloat appends a sample value as the text format writes it.
func AppendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func formatFloat(v float64) string { return string(AppendFloat(nil, v)) }

// CounterVec is a counter with labels, fed as things happen.
type CounterVec struct {
	f      *Family
	series seriesMap[counterSeries]
}

type counterSeries struct {
	values []string
	c      CounterValue
}

// CounterValue is one series of a counter.
type CounterValue struct{ bits atomic.Uint64 }

// Add adds v (which must not be negative).
func (c *CounterValue) Add(v float64) {
	if v < 0 {
		panic("promtext: a counter cannot decrease")
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Inc adds 1.
func (c *CounterValue) Inc() { c.Add(1) }

// Value is the count so far.
func (c *CounterValue) Value() float64 { return math.Float64frombits(c.bits.Load()) }

// NewCounterVec makes a counter family.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{f: NewFamily(name, help, Counter, labels...)}
}

// WithLabelValues is the series of the label values (made at first use).
func (v *CounterVec) WithLabelValues(values ...string) *CounterValue {
	mustMatch(v.f, values)
	return &v.series.get(values, func() *counterSeries { return &counterSeries{values: slices.Clone(values)} }).c
}

// Families is the counter's family.
func (v *CounterVec) Families() []*Family { return []*Family{v.f} }

// Collect adds every series used so far.
func (v *CounterVec) Collect(_ context.Context, s *Scrape) error {
	v.series.each(func(se *counterSeries) { s.Add(v.f, se.c.Value(), se.values...) })
	return nil
}

// HistogramVec is a histogram with labels (or none), fed as things happen.
type HistogramVec struct {
	f      *Family
	bounds []float64 // the buckets' upper bounds, ascending, without +Inf
	series seriesMap[HistogramValue]
}

// HistogramValue is one series of a histogram.
type HistogramValue struct {
	bounds []float64
	values []string
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; observations above the last bound are in count only
	sum    float64
	count  uint64
}

// NewHistogramVec makes a histogram family with the buckets' upper
// bounds (ascending).
func NewHistogramVec(name, help string, bounds []float64, labels ...string) *HistogramVec {
	if !slices.IsSorted(bounds) {
		panic("promtext: " + name + ": bucket bounds not ascending")
	}
	return &HistogramVec{f: NewFamily(name, help, Histogram, labels...), bounds: bounds}
}

// WithLabelValues is the series of the label values (made at first use).
func (v *HistogramVec) WithLabelValues(values ...string) *HistogramValue {
	mustMatch(v.f, values)
	return v.series.get(values, func() *HistogramValue {
		return &HistogramValue{bounds: v.bounds, values: slices.Clone(values), counts: make([]uint64, len(v.bounds))}
	})
}

// Observe records one value.
func (h *HistogramValue) Observe(x float64) {
	i := sort.SearchFloat64s(h.bounds, x) // the first bound ≥ x
	h.mu.Lock()
	defer h.mu.Unlock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += x
	h.count++
}

// Families is the histogram's family.
func (v *HistogramVec) Families() []*Family { return []*Family{v.f} }

// Collect adds every series used so far; a histogram without labels
// shows its series (all zeros) before its first observation.
func (v *HistogramVec) Collect(_ context.Context, s *Scrape) error {
	if len(v.f.Labels) == 0 {
		v.WithLabelValues()
	}
	v.series.each(func(h *HistogramValue) {
		h.mu.Lock()
		defer h.mu.Unlock()
		s.addHistogram(v.f, v.bounds, slices.Clone(h.counts), h.sum, h.count, h.values)
	})
	return nil
}

// seriesMap is a vector's series by their label values.
type seriesMap[T any] struct {
	mu sync.RWMutex
	m  map[string]*T
}

// get is the series of values, made by mk at its first use.
func (sm *seriesMap[T]) get(values []string, mk func() *T) *T {
	k := strings.Join(values, "\x00")
	sm.mu.RLock()
	t := sm.m[k]
	sm.mu.RUnlock()
	if t != nil {
		return t
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if t = sm.m[k]; t == nil {
		if sm.m == nil {
			sm.m = map[string]*T{}
		}
		t = mk()
		sm.m[k] = t
	}
	return t
}

// each calls f with every series made so far.
func (sm *seriesMap[T]) each(f func(*T)) {
	sm.mu.RLock()
	defer sm.mu.RUnlock()
	for _, t := range sm.m {
		f(t)
	}
}
