package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// latency is the time from a job's Queued to its Running transition as the
// server recorded them (no polling error in the figure).
func latency(t testing.TB, j api.Job) time.Duration {
	var queued, running time.Time
	for _, h := range j.Properties.History {
		switch h.Status {
		case api.JobQueued:
			if queued.IsZero() {
				queued = h.Time
			}
		case api.JobRunning:
			if running.IsZero() {
				running = h.Time
			}
		}
	}
	if queued.IsZero() || running.IsZero() {
		t.Fatalf("job %s has no Queued→Running history: %+v", j.Name, j.Properties.History)
	}
	return running.Sub(queued)
}

func report(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	pct := func(p float64) float64 {
		i := int(float64(len(ds)-1) * p)
		return float64(ds[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}

func benchServer(b *testing.B) *server { return startServerTB(b, "--log-level", "warn") }

// BenchmarkSubmitToRunningWarm: a job submitted to a cluster with one warm
// idle node; Queued→Running as recorded by the server.
//
//	go test ./test/cluster/ -run '^$' -bench SubmitToRunningWarm -benchtime 100x
func BenchmarkSubmitToRunningWarm(b *testing.B) { benchWarm(b, "", 0) }

// BenchmarkSubmitToRunningWarmContainer: the same with the job in a
// container of a local image (docker run on the node), to show the
// container start overhead.
//
//	go test ./test/cluster/ -run '^$' -bench SubmitToRunningWarmContainer -benchtime 30x
func BenchmarkSubmitToRunningWarmContainer(b *testing.B) {
	dockerOnce.Do(func() { dockerErr = buildTestImage() })
	if dockerErr != nil {
		b.Skipf("no Docker engine: %v", dockerErr)
	}
	benchWarm(b, "image:"+testImage, 0)
}

// BenchmarkSubmitToRunningWarmContainerPaced: the same with a pause of
// half a second between jobs, as jobs that do not come back to back: the
// node's next prepared container is ready when the job comes, so the
// figure is what a job pays over a process when its container is ready.
//
//	go test ./test/cluster/ -run '^$' -bench SubmitToRunningWarmContainerPaced -benchtime 20x
func BenchmarkSubmitToRunningWarmContainerPaced(b *testing.B) {
	dockerOnce.Do(func() { dockerErr = buildTestImage() })
	if dockerErr != nil {
		b.Skipf("no Docker engine: %v", dockerErr)
	}
	benchWarm(b, "image:"+testImage, 500*time.Millisecond)
}

// benchWarm submits b.N jobs of `true` one after another to one warm node,
// each once the node is idle again and pause has passed.
func benchWarm(b *testing.B, env string, pause time.Duration) {
	s := benchServer(b)
	s.createCompute("warm", 1, 1, "PT10M")
	waitFor(b, "the warm node", 30*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "warm")
		return err == nil && len(n) == 1 && n[0].NodeState == api.NodeIdle
	})
	var ds, done []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("warm-%d", i)
		s.submitJob(api.Job{Name: name, Properties: api.JobProperties{Command: "true", ComputeID: "warm", EnvironmentID: env}})
		waitFor(b, name, 30*time.Second, func() bool { return api.JobTerminal(s.job(name).Properties.Status) })
		j := s.job(name)
		ds = append(ds, latency(b, j))
		done = append(done, j.Properties.EndTime.Sub(j.Properties.History[0].Time))
		waitFor(b, "the node idle again", 30*time.Second, func() bool {
			n, err := s.c.ListNodes(bctx, "warm")
			return err == nil && len(n) == 1 && n[0].NodeState == api.NodeIdle
		})
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause) // a pause between jobs, not a wait for anything
			b.StartTimer()
		}
	}
	b.StopTimer()
	report(b, ds)
	slices.Sort(done)
	b.ReportMetric(float64(done[len(done)/2].Microseconds())/1000, "p50-done-ms")
}

// BenchmarkScaleFromZero: a job submitted to an empty cluster; the time
// includes asking the local provider for a node, the agent process
// starting and registering, and the job starting on it.
//
//	go test ./test/cluster/ -run '^$' -bench ScaleFromZero -benchtime 20x
func BenchmarkScaleFromZero(b *testing.B) {
	s := benchServer(b)
	s.createCompute("cold", 0, 1, "PT0S")
	benchFromZero(b, s, "cold", func() bool { return true })
}

// benchFromZero submits b.N jobs one at a time to an empty cluster of
// max 1 and idle time 0, waiting each time for the cluster to be empty
// again (no nodes, and gone() for what the provider leaves).
func benchFromZero(b *testing.B, s *server, compute string, gone func() bool) {
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("%s-%d", compute, i)
		s.submit(name, compute, "true")
		waitFor(b, name, 60*time.Second, func() bool { return api.JobTerminal(s.job(name).Properties.Status) })
		ds = append(ds, latency(b, s.job(name)))
		waitFor(b, "the cluster empty again", 60*time.Second, func() bool {
			n, err := s.c.ListNodes(bctx, compute)
			return err == nil && len(n) == 0 && gone()
		})
	}
	b.StopTimer()
	report(b, ds)
}

// benchBurst submits n jobs at once to an empty cluster of max n and idle
// time 0, b.N times, waiting each time for the cluster to be empty again
// (no nodes, and gone() for what the provider leaves); it reports each
// job's Queued→Running and the time until the last one ran ("all-ms").
func benchBurst(b *testing.B, s *server, compute string, n int, timeout time.Duration, gone func() bool) {
	var ds, all []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for k := 0; k < n; k++ {
			s.submit(fmt.Sprintf("%s-%d-%d", compute, i, k), compute, "sleep 1")
		}
		var last time.Time
		for k := 0; k < n; k++ {
			name := fmt.Sprintf("%s-%d-%d", compute, i, k)
			waitFor(b, name, timeout, func() bool { return api.JobTerminal(s.job(name).Properties.Status) })
			j := s.job(name)
			ds = append(ds, latency(b, j))
			for _, h := range j.Properties.History {
				if h.Status == api.JobRunning && h.Time.After(last) {
					last = h.Time
				}
			}
		}
		all = append(all, last.Sub(start))
		waitFor(b, "the cluster empty again", timeout, func() bool {
			nodes, err := s.c.ListNodes(bctx, compute)
			return err == nil && len(nodes) == 0 && gone()
		})
	}
	b.StopTimer()
	report(b, ds)
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "all-ms")
}
