package api_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"PT5M":       5 * time.Minute,
		"PT120S":     120 * time.Second,
		"P1DT2H":     26 * time.Hour,
		"PT1.5S":     1500 * time.Millisecond,
		"PT0.25S":    250 * time.Millisecond,
		"PT1H30M":    90 * time.Minute,
		"P1W":        7 * 24 * time.Hour,
		"P2D":        48 * time.Hour,
		"PT0S":       0,
		"P1DT1H1M1S": 25*time.Hour + time.Minute + time.Second,
		"PT36H":      36 * time.Hour,
	}
	for s, want := range ok {
		got, err := api.ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	bad := []string{
		"", "P", "PT", "T5M", "5 minutes", "5m", "120", "P1Y", "P1M", "PTXS", "PT5", "P1DT", "PTT5M",
		"PT5D", "P5H", "PT1.2.3S", "PT-5M", "PT+5M", "P1000000D", "pt5m", "PT5M ", " PT5M", "PT5MX", "PT.S",
	}
	for _, s := range bad {
		if d, err := api.ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", s, d)
		} else if !strings.Contains(err.Error(), "duration") && !strings.Contains(err.Error(), "years") {
			t.Errorf("ParseDuration(%q) error %q does not explain itself", s, err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0:                                     "PT0S",
		-5 * time.Second:                      "PT0S",
		time.Second:                           "PT1S",
		2 * time.Minute:                       "PT2M",
		90 * time.Minute:                      "PT1H30M",
		24 * time.Hour:                        "P1D",
		25 * time.Hour:                        "P1DT1H",
		1500 * time.Millisecond:               "PT1.5S",
		7*24*time.Hour + 3*time.Second:        "P7DT3S",
		time.Hour + time.Minute + time.Second: "PT1H1M1S",
	}
	for d, want := range cases {
		if got := api.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestDurationRoundTrip checks Parse(Format(d)) == d for whole seconds and
// milliseconds (what ARM clients send), and that Format(Parse(s)) is the
// canonical spelling.
func TestDurationRoundTrip(t *testing.T) {
	fixed := []time.Duration{
		0, time.Second, 59 * time.Second, time.Minute, 120 * time.Second, time.Hour, 26 * time.Hour,
		7 * 24 * time.Hour, 1500 * time.Millisecond, 250 * time.Millisecond, 3*time.Hour + 4*time.Minute + 5*time.Second,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		fixed = append(fixed, time.Duration(r.Int64N(int64(30*24*time.Hour)/int64(time.Second)))*time.Second)
	}
	for _, d := range fixed {
		s := api.FormatDuration(d)
		got, err := api.ParseDuration(s)
		if err != nil || got != d {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, s, got, err)
		}
	}
	for in, canon := range map[string]string{"PT120S": "PT2M", "PT60M": "PT1H", "PT24H": "P1D", "P1W": "P7D", "PT90S": "PT1M30S"} {
		d, err := api.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := api.FormatDuration(d); got != canon {
			t.Errorf("FormatDuration(ParseDuration(%q)) = %q, want %q", in, got, canon)
		}
	}
}

// TestDurationRoundTripFractional: durations with fractional seconds
// (PT1.001S) must survive the round trip too. ParseDuration computes
// float seconds * 1e9 and truncates, so 1.001 s comes back as 1.000999999 s.
func TestDurationRoundTripFractional(t *testing.T) {
	ds := []time.Duration{1001 * time.Millisecond, 10*24*time.Hour + 999*time.Millisecond, time.Nanosecond,
		3*time.Millisecond + 7*time.Nanosecond, 123456789 * time.Nanosecond}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		ds = append(ds, time.Duration(r.Int64N(int64(7*24*time.Hour)/int64(time.Millisecond)))*time.Millisecond)
	}
	var failed []string
	for _, d := range ds {
		s := api.FormatDuration(d)
		got, err := api.ParseDuration(s)
		if err != nil || got != d {
			failed = append(failed, fmt.Sprintf("%s -> %v", s, got))
		}
		if d%time.Millisecond == 0 {
			if _, frac, ok := strings.Cut(strings.TrimSuffix(s, "S"), "."); ok && len(frac) > 3 {
				failed = append(failed, fmt.Sprintf("FormatDuration(%v) = %s", d, s))
			}
		}
	}
	if len(failed) > 0 {
		// Skipped while the bug stands; passes on its own once fixed.
		t.Fatalf("api.ParseDuration truncates float seconds instead of rounding, and FormatDuration prints float noise (PT6.3469999999999995S); %d problems over %d durations, e.g. %s",
			len(failed), len(ds), strings.Join(failed[:min(3, len(failed))], ", "))
	}
}
