package sim

import (
	"testing"
	"time"
)

// benchmarkRun simulates 100,000 synthetic jobs (about 100 days of four
// teams' sweeps and single jobs) on Standard_NC6s_v3 nodes, ready in
// 4 min ± 1.
func benchmarkRun(b *testing.B, kind, policy string) {
	tr, err := Synthetic(kind, 100_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Size, cfg.Max, cfg.Policy = "Standard_NC6s_v3", 1000, policy
	cfg.Provision = Delay{4 * time.Minute, time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		r, err := Run(tr, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if r.Total.Completed != len(tr.Jobs) {
			b.Fatalf("%d of %d jobs completed", r.Total.Completed, len(tr.Jobs))
		}
	}
}

func BenchmarkRun100kBurstyFixed(b *testing.B)     { benchmarkRun(b, Bursty, PolicyFixed) }
func BenchmarkRun100kBurstyAdaptive(b *testing.B)  { benchmarkRun(b, Bursty, PolicyAdaptive) }
func BenchmarkRun100kDiurnalAdaptive(b *testing.B) { benchmarkRun(b, Diurnal, PolicyAdaptive) }

// BenchmarkRun100kBurstyFair is BenchmarkRun100kBurstyFixed with the
// four teams sharing one cluster under fair share, with preemption.
func BenchmarkRun100kBurstyFair(b *testing.B) {
	tr, err := Synthetic(Bursty, 100_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Size, cfg.Max = "Standard_NC6s_v3", 1000
	cfg.Provision = Delay{4 * time.Minute, time.Minute}
	cfg.Queue, cfg.Preemption = QueueFair, PreemptOverShare
	b.ReportAllocs()
	for b.Loop() {
		r, err := Run(tr, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if r.Total.Completed != len(tr.Jobs) {
			b.Fatalf("%d of %d jobs completed", r.Total.Completed, len(tr.Jobs))
		}
	}
}
