package promtext

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/testbin"
)

type failing struct{ f *Family }

func (c failing) Families() []*Family { return []*Family{c.f} }
func (c failing) Collect(_ context.Context, s *Scrape) error {
	s.Add(c.f, 1)
	return errors.New("store down")
}

type gauges struct{ f *Family }

func (c gauges) Families() []*Family { return []*Family{c.f} }
func (c gauges) Collect(_ context.Context, s *Scrape) error {
	s.Add(c.f, 2, "b", `q"uo\te`+"\n")
	s.Add(c.f, 1.5, "a", "z")
	return nil
}

func exposition(t *testing.T, r *Registry) string {
	t.Helper()
	b, err := r.Append(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Families come by name, each once with its help and type, series by
// their labels' values with the labels by name, values escaped.
func TestExposition(t *testing.T) {
	var r Registry
	c := NewCounterVec("x_events_total", "Events\\ by kind,\nper line.", "kind")
	c.WithLabelValues("b").Add(2.5)
	c.WithLabelValues("a").Inc()
	c.WithLabelValues("b").Inc()
	r.Register(c, gauges{NewFamily("a_gauge", "A gauge.", Gauge, "zone", "name")})
	want := `# HELP a_gauge A gauge.
# TYPE a_gauge gauge
a_gauge{name="q\"uo\\te\n",zone="b"} 2
a_gauge{name="z",zone="a"} 1.5
# HELP x_events_total Events\\ by kind,\nper line.
# TYPE x_events_total counter
x_events_total{kind="a"} 1
x_events_total{kind="b"} 3.5
`
	if got := exposition(t, &r); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// A histogram's buckets count every observation at or below their bound
// (cumulative), +Inf counts all; one without labels shows before its
// first observation.
func TestHistogram(t *testing.T) {
	var r Registry
	h := NewHistogramVec("op_seconds", "Ops.", []float64{0.5, 1, 2})
	r.Register(h)
	if got := exposition(t, &r); !strings.Contains(got, `op_seconds_bucket{le="+Inf"} 0`) || !strings.Contains(got, "op_seconds_count 0\n") {
		t.Errorf("an unobserved histogram:\n%s", got)
	}
	for _, v := range []float64{0.1, 0.5, 0.7, 3, 10} {
		h.WithLabelValues().Observe(v)
	}
	want := `# HELP op_seconds Ops.
# TYPE op_seconds histogram
op_seconds_bucket{le="0.5"} 2
op_seconds_bucket{le="1"} 3
op_seconds_bucket{le="2"} 3
op_seconds_bucket{le="+Inf"} 5
op_seconds_sum 14.3
op_seconds_count 5
`
	if got := exposition(t, &r); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
	lv := NewHistogramVec("req_seconds", "Requests.", []float64{1}, "method")
	lv.WithLabelValues("GET").Observe(2)
	var r2 Registry
	r2.Register(lv)
	if got := exposition(t, &r2); !strings.Contains(got, `req_seconds_bucket{method="GET",le="1"} 0`+"\n"+`req_seconds_bucket{method="GET",le="+Inf"} 1`) {
		t.Errorf("labelled histogram:\n%s", got)
	}
}

// A collector that fails fails the whole scrape: a partial exposition
// would read as zeros.
func TestCollectorErrorFailsTheScrape(t *testing.T) {
	var r Registry
	r.Register(NewCounterVec("ok_total", "Fine.", "a"), failing{NewFamily("bad", "Bad.", Gauge)})
	if _, err := r.Append(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("Append = %v; want the collector's error", err)
	}
}

// The process's own figures are there, under the names Prometheus's
// client gives them.
func TestRuntime(t *testing.T) {
	var r Registry
	r.Register(Runtime{})
	got := exposition(t, &r)
	for _, name := range []string{"go_goroutines ", "go_memstats_alloc_bytes ", "process_cpu_seconds_total ", "process_resident_memory_bytes ",
		"process_open_fds ", "process_start_time_seconds "} {
		if !strings.Contains(got, "\n"+name) {
			t.Errorf("no %s in\n%s", name, got)
		}
	}
}

// A start of the cumulus binary (the CLI's, an agent's) initializes no
// metrics client library: Prometheus's client registers Go and process
// collectors at its package init, about 2 ms of CPU per start.
func TestBinaryStartsWithoutAMetricsClient(t *testing.T) {
	bin, _, err := testbin.Cumulus(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cumulus version: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" &&
			(strings.HasPrefix(f[1], "github.com/prometheus/") || strings.HasPrefix(f[1], "google.golang.org/protobuf")) {
			t.Errorf("a start of cumulus initialized %s: %s", f[1], line)
		}
	}
}

// Series fed from many goroutines at once count every increment and
// every observation.
func TestConcurrentFeeding(t *testing.T) {
	c := NewCounterVec("c_total", "C.", "k")
	h := NewHistogramVec("h_seconds", "H.", []float64{1}, "k")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := strconv.Itoa((g + i) % 3)
				c.WithLabelValues(k).Inc()
				h.WithLabelValues(k).Observe(0.5)
			}
		}()
	}
	wg.Wait()
	sum := 0.0
	var n uint64
	for _, k := range []string{"0", "1", "2"} {
		sum += c.WithLabelValues(k).Value()
		n += h.WithLabelValues(k).count
	}
	if sum != 8000 || n != 8000 {
		t.Errorf("counted %v increments and %d observations; want 8000 of each", sum, n)
	}
}
