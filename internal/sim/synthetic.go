package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Synthetic trace kinds.
const (
	Bursty  = "bursty"
	Diurnal = "diurnal"
)

// Synthetic generates a trace of n jobs of the given kind from a seed; the
// same kind, n and seed always give the same trace.
//
//   - bursty: four teams (vc team-a … team-d, 40/30/20/10 % of the work).
//     Each submits hyperparameter sweeps (Poisson, about 1.2 an hour in
//     all; 1 to 200 similar jobs, median 8, mean about 15, 5 s apart on
//     average) and single jobs (Poisson, about 20 an hour in all): about
//     38 jobs an hour. Run times are log-normal,
//     median 25 minutes, p90 about 3 hours (as in Philly); 85 % of sweeps
//     use 1 GPU, the others 2, 4 or 8.
//   - diurnal: two teams (team-a, team-b) submitting single jobs as a
//     Poisson process whose rate follows the working day: 90 an hour at
//     15:00 on weekdays, 10 at 03:00, and a third of that on weekends
//     (about 40 an hour on average). Run
//     times are log-normal, median 20 minutes; 90 % use 1 GPU.
//
// Times are whole seconds from the start of a Monday.
func Synthetic(kind string, n int, seed uint64) (*Trace, error) {
	if n < 1 {
		return nil, fmt.Errorf("synthetic trace of %d jobs: want at least 1", n)
	}
	r := rand.New(rand.NewPCG(seed, 0x7ace))
	var jobs []Job
	switch kind {
	case Bursty:
		jobs = bursty(r, n)
	case Diurnal:
		jobs = diurnal(r, n)
	default:
		return nil, fmt.Errorf("synthetic trace %q: want %s or %s", kind, Bursty, Diurnal)
	}
	t := &Trace{Name: fmt.Sprintf("synthetic:%s:%d (seed %d)", kind, n, seed), Jobs: jobs, HasGPUs: true, HasVC: true}
	t.sort()
	t.Jobs = slices.Clip(t.Jobs[:n])
	return t, nil
}

// ParseSynthetic reads "synthetic:KIND" or "synthetic:KIND:N" (N jobs,
// default defJobs); ok is false for anything else (a file name).
func ParseSynthetic(s string, defJobs int) (kind string, n int, ok bool, err error) {
	rest, found := strings.CutPrefix(s, "synthetic:")
	if !found {
		return "", 0, false, nil
	}
	kind, num, hasN := strings.Cut(rest, ":")
	n = defJobs
	if hasN {
		if _, err := fmt.Sscanf(num, "%d", &n); err != nil || n < 1 {
			return "", 0, true, fmt.Errorf("trace %q: %q is not a number of jobs", s, num)
		}
	}
	if kind != Bursty && kind != Diurnal {
		return "", 0, true, fmt.Errorf("trace %q: synthetic kinds are %s and %s", s, Bursty, Diurnal)
	}
	return kind, n, true, nil
}

// logNormal draws a run time with the given median and log-spread, whole
// seconds, at least 10 s and at most 3 days.
func logNormal(r *rand.Rand, median time.Duration, sigma float64) time.Duration {
	s := median.Seconds() * math.Exp(sigma*r.NormFloat64())
	return time.Duration(math.Round(min(max(s, 10), 3*86400))) * time.Second
}

func exp(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

func whole(d time.Duration) time.Duration { return d.Round(time.Second) }

func bursty(r *rand.Rand, n int) []Job {
	teams := []struct {
		vc    string
		share float64
	}{{"team-a", 0.4}, {"team-b", 0.3}, {"team-c", 0.2}, {"team-d", 0.1}}
	const (
		sweepsPerHour  = 1.2
		singlesPerHour = 20.0
		jobsPerHour    = singlesPerHour + sweepsPerHour*15 // sweeps average about 15 jobs
	)
	gpuChoices := []int{2, 4, 8}
	// Generate over a span that should hold n jobs; stretch it if it
	// does not (the caller keeps the first n).
	for span := time.Duration(float64(n) / jobsPerHour * 1.2 * float64(time.Hour)); ; span = span * 3 / 2 {
		var jobs []Job
		for _, tm := range teams {
			singleGap := time.Duration(float64(time.Hour) / (singlesPerHour * tm.share))
			for t := exp(r, singleGap); t < span; t += exp(r, singleGap) {
				g := 1
				if r.Float64() < 0.1 {
					g = gpuChoices[r.IntN(len(gpuChoices))]
				}
				jobs = append(jobs, Job{Submit: whole(t), Duration: logNormal(r, 25*time.Minute, 1.5), GPUs: g, VC: tm.vc})
			}
			sweepGap := time.Duration(float64(time.Hour) / (sweepsPerHour * tm.share))
			for t := exp(r, sweepGap); t < span; t += exp(r, sweepGap) {
				size := min(max(int(math.Round(8*math.Exp(1.2*r.NormFloat64()))), 1), 200)
				g := 1
				if r.Float64() < 0.15 {
					g = gpuChoices[r.IntN(len(gpuChoices))]
				}
				median := logNormal(r, 25*time.Minute, 1.5)
				at := t
				for range size {
					jobs = append(jobs, Job{Submit: whole(at), Duration: logNormal(r, median, 0.3), GPUs: g, VC: tm.vc})
					at += exp(r, 5*time.Second)
				}
			}
		}
		if len(jobs) >= n {
			return jobs
		}
	}
}

func diurnal(r *rand.Rand, n int) []Job {
	// Rate by hour of the week, thinned from the peak rate.
	const peak = 90.0 // jobs an hour, weekdays at 15:00
	rate := func(t time.Duration) float64 {
		h := math.Mod(t.Hours(), 24)
		day := int(t.Hours()/24) % 7 // 0 is Monday
		// 10 an hour at 03:00 rising to 90 at 15:00.
		v := 50 - 40*math.Cos(2*math.Pi*(h-3)/24)
		if day >= 5 {
			v /= 3
		}
		return v
	}
	gap := time.Duration(float64(time.Hour) / peak)
	jobs := make([]Job, 0, n)
	for t := exp(r, gap); len(jobs) < n; t += exp(r, gap) {
		if r.Float64()*peak > rate(t) {
			continue
		}
		g := 1
		if r.Float64() < 0.1 {
			g = []int{2, 4}[r.IntN(2)]
		}
		vc := "team-a"
		if r.IntN(2) == 1 {
			vc = "team-b"
		}
		jobs = append(jobs, Job{Submit: whole(t), Duration: logNormal(r, 20*time.Minute, 1.2), GPUs: g, VC: vc})
	}
	return jobs
}
