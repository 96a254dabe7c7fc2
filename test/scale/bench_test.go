package scale

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider/sim"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func pct(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	return float64(ds[int(float64(len(ds)-1)*p)].Microseconds()) / 1000
}

func reportLatency(b *testing.B, prefix string, ds []time.Duration) {
	b.ReportMetric(pct(ds, 0.50), prefix+"p50-ms")
	b.ReportMetric(pct(ds, 0.99), prefix+"p99-ms")
}

// BenchmarkSchedulingThroughput: SCALE_NODES (5,000) simulated nodes
// registered and idle, SCALE_JOBS (100,000) one-node jobs queued at once
// (seeded in the store), simulated jobs that end at once. Reports the first
// wave (one job on every idle node: queued → assigned, recorded in the
// store) and the sustained rate of the whole loop (assign, node starts,
// node reports exited, node idle, next assignment) over 60 s at most.
//
//	go test ./test/scale/ -run '^$' -bench SchedulingThroughput -benchtime 1x -timeout 30m
func BenchmarkSchedulingThroughput(b *testing.B) {
	nodes, jobs := env("SCALE_NODES", 5000), env("SCALE_JOBS", 100000)
	p := start(b, 0)
	t0 := time.Now()
	// A compute holds at most 10,000 nodes: more nodes are spread over
	// several computes, the jobs over them in proportion.
	clusters := (nodes + api.MaxClusterNodes - 1) / api.MaxClusterNodes
	ids := make([]string, clusters)
	for c := range clusters {
		name, size := "sched", nodes/clusters
		if c > 0 {
			name = fmt.Sprintf("sched%c", 'a'+c-1)
		}
		if c == clusters-1 {
			size = nodes - (clusters-1)*(nodes/clusters)
		}
		ids[c] = p.compute(b, name, int32(size), int32(size), "PT1H")
	}
	waitFor(b, "the nodes idle", 10*time.Minute, func() bool {
		return count(b, p.d.DB, `SELECT count(*) FROM nodes WHERE state = ?`, api.NodeIdle) >= nodes
	})
	registered := float64(nodes) / time.Since(t0).Seconds() // reported at the end: ResetTimer drops metrics
	for c, id := range ids {
		n := jobs / clusters
		if c == clusters-1 {
			n = jobs - (clusters-1)*(jobs/clusters)
		}
		seedJobs(b, p, id, fmt.Sprintf("q%d-", c), api.JobQueued, n)
	}
	// Placed jobs are counted (an index range per status, small while the
	// queue is long) rather than the queue (100,000 index entries a look),
	// so the measurement takes little of the 2 cores it measures.
	placed := func() int {
		total := 0
		for _, id := range ids {
			total += count(b, p.d.DB, `SELECT count(*) FROM jobs WHERE compute = ? AND status IN (?, ?, ?, ?, ?, ?, ?)`, store.Key(id),
				api.JobPreparing, api.JobStarting, api.JobRunning, api.JobFinalizing, api.JobCompleted, api.JobFailed, api.JobCanceled)
		}
		return total
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	// Any submit wakes the cluster controller.
	if _, err := p.c.PutJob(bctx, api.Job{Name: "kick", Properties: api.JobProperties{Command: "true", ComputeID: "sched"}}); err != nil {
		b.Fatal(err)
	}
	total := jobs + 1
	var wave time.Duration
	for {
		left := total - placed()
		if wave == 0 && total-left >= min(nodes, total) {
			wave = time.Since(start)
		}
		if left == 0 || time.Since(start) > 60*time.Second {
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(total-left)/el.Seconds(), "placed/s-sustained")
			b.ReportMetric(float64(total-left), "placed")
			// The CPU of this process a job placed and ended: the control
			// plane's and, unless SCALE_SIM_PROCESS, the simulated agents'.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(max(total-left, 1)), "cpu-us/job")
			break
		}
		// Fine-grained while the first wave is timed; afterwards a count
		// (which grows with the jobs placed) twice a second is enough.
		if wave == 0 {
			time.Sleep(50 * time.Millisecond)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if wave > 0 {
		b.ReportMetric(float64(min(nodes, total))/wave.Seconds(), "placed/s-first-wave")
		b.ReportMetric(float64(wave.Milliseconds()), "first-wave-ms")
	}
	b.ReportMetric(registered, "nodes-registered/s")
	b.ReportMetric(0, "ns/op")
}

// latencyOf is Queued→Running as the server recorded it.
func latencyOf(b *testing.B, j api.Job) time.Duration {
	var queued, running time.Time
	for _, h := range j.Properties.History {
		if h.Status == api.JobQueued && queued.IsZero() {
			queued = h.Time
		}
		if h.Status == api.JobRunning && running.IsZero() {
			running = h.Time
		}
	}
	if queued.IsZero() || running.IsZero() {
		b.Fatalf("job %s has no Queued→Running history", j.Name)
	}
	return running.Sub(queued)
}

// BenchmarkSubmitToRunningWarm: one warm idle simulated node; each job is
// submitted through the API and its server-recorded Queued→Running taken.
//
//	go test ./test/scale/ -run '^$' -bench SubmitToRunningWarm -benchtime 200x
func BenchmarkSubmitToRunningWarm(b *testing.B) {
	p := start(b, 0)
	p.compute(b, "warm", 1, 1, "PT1H")
	idle := func() bool {
		n, err := p.c.ListNodes(bctx, "warm")
		return err == nil && len(n) == 1 && n[0].NodeState == api.NodeIdle
	}
	waitFor(b, "the warm node", time.Minute, idle)
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("warm-%d", i)
		if _, err := p.c.PutJob(bctx, api.Job{Name: name, Properties: api.JobProperties{Command: "true", ComputeID: "warm"}}); err != nil {
			b.Fatal(err)
		}
		var j api.Job
		waitFor(b, name, 30*time.Second, func() bool {
			var err error
			j, err = p.c.GetJob(bctx, name)
			return err == nil && api.JobTerminal(j.Properties.Status)
		})
		ds = append(ds, latencyOf(b, j))
		waitFor(b, "the node idle again", 30*time.Second, idle)
	}
	b.StopTimer()
	reportLatency(b, "", ds)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkQueuedToScaleUp: a job submitted to an empty cluster; the time
// from its Queued stamp to the node record the controller writes just
// before it asks the provider (intent first), so the figure is queued →
// scale-up request. The node is removed again after each job.
//
//	go test ./test/scale/ -run '^$' -bench QueuedToScaleUp -benchtime 50x
func BenchmarkQueuedToScaleUp(b *testing.B) {
	p := start(b, 0)
	id := p.compute(b, "cold", 0, 1, "PT0S")
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("cold-%d", i)
		// The job runs 300 ms so that its node lives long enough to be seen.
		j, err := p.c.PutJob(bctx, api.Job{Name: name, Properties: api.JobProperties{Command: "true", ComputeID: "cold",
			EnvironmentVariables: map[string]string{sim.DurationEnv: "300ms"}}})
		if err != nil {
			b.Fatal(err)
		}
		var created time.Time
		waitFor(b, "a node record", 30*time.Second, func() bool {
			nodes, err := store.NodesOf(bctx, p.d.DB.Q(), id)
			if err != nil || len(nodes) == 0 {
				return false
			}
			created = nodes[0].Created
			return true
		})
		ds = append(ds, created.Sub(j.Properties.History[len(j.Properties.History)-1].Time))
		waitFor(b, "the cluster empty again", 30*time.Second, func() bool {
			nodes, err := store.NodesOf(bctx, p.d.DB.Q(), id)
			return err == nil && len(nodes) == 0
		})
	}
	b.StopTimer()
	reportLatency(b, "", ds)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAPILatencyUnderLoad: a store holding SCALE_STORE_JOBS
// (1,000,000) finished jobs and SCALE_STORE_NODES (10,000) nodes; 64
// concurrent clients mix job submits, job gets, compute lists and pages
// of the job list (a quarter each) for 20 s. Also reports the process's
// RSS and Go heap with that store open (the control plane and the
// benchmark share the process).
//
//	go test ./test/scale/ -run '^$' -bench APILatencyUnderLoad -benchtime 1x -timeout 30m
func BenchmarkAPILatencyUnderLoad(b *testing.B) {
	jobs, nodes := env("SCALE_STORE_JOBS", 1000000), env("SCALE_STORE_NODES", 10000)
	p := start(b, 0)
	id := p.compute(b, "big", 0, int32(nodes), "PT1H")
	t0 := time.Now()
	seedJobs(b, p, id, "done", api.JobCompleted, jobs)
	seedNodes(b, p, id, "simnode", nodes)
	b.Logf("seeded %d jobs and %d nodes in %s", jobs, nodes, time.Since(t0).Round(time.Millisecond))
	// The leader folds PostgreSQL's count rows every few seconds; seeding
	// a million jobs at once left a million of them.
	if err := p.d.DB.CompactCounts(bctx); err != nil {
		b.Fatal(err)
	}
	dur := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("SCALE_LOAD_FOR")); err == nil {
		dur = v
	}
	const clients = 64
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	errs := map[string]int{}
	b.ResetTimer()
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				var kind string
				var err error
				t := time.Now()
				switch i % 4 {
				case 0:
					kind = "submit"
					_, err = p.c.PutJob(bctx, api.Job{Name: fmt.Sprintf("load-%d-%d", c, i),
						Properties: api.JobProperties{Command: "true", ComputeID: "big"}})
				case 1:
					kind = "get"
					_, err = p.c.GetJob(bctx, fmt.Sprintf("done-%07d", (c*7919+i*104729)%jobs))
				case 2:
					kind = "list-computes"
					_, err = p.c.ListComputes(bctx)
				case 3:
					// One page of the workspace's job list (a million
					// finished jobs and the new ones), as the studio asks.
					kind = "list-jobs"
					var page struct {
						Value []api.Job `json:"value"`
					}
					_, err = p.c.Do(bctx, http.MethodGet, p.c.Scope.WorkspaceID()+"/jobs", nil, &page)
				}
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					errs[kind]++
				} else {
					lat[kind] = append(lat[kind], d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	for _, k := range []string{"submit", "get", "list-computes", "list-jobs"} {
		if len(lat[k]) > 0 {
			reportLatency(b, k+"-", lat[k])
			b.ReportMetric(float64(len(lat[k]))/dur.Seconds(), k+"/s")
		}
		if errs[k] > 0 {
			b.Logf("%s: %d errors", k, errs[k])
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(rssKiB())/1024, "rss-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(0, "ns/op")
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKiB is this process's resident set (VmRSS).
func rssKiB() int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// BenchmarkSubmitRate: SCALE_NODES (64) simulated nodes, idle, and
// SCALE_SUBMITTERS (8) clients that each submit jobs of 0 s over REST,
// one after the other, for SCALE_LOAD_FOR (10 s): the jobs are placed and
// end as fast as they come, so this is the submit path with the
// scheduler and the agents behind it. Reports submits a second, each
// submit's latency, and jobs ended a second over the same time.
//
//	go test ./test/scale/ -run '^$' -bench SubmitRate -benchtime 1x -timeout 30m
func BenchmarkSubmitRate(b *testing.B) {
	nodes, submitters := env("SCALE_NODES", 64), env("SCALE_SUBMITTERS", 8)
	dur := 10 * time.Second
	if v, err := time.ParseDuration(os.Getenv("SCALE_LOAD_FOR")); err == nil {
		dur = v
	}
	p := start(b, 0)
	id := p.compute(b, "rate", int32(nodes), int32(nodes), "PT1H")
	waitFor(b, "the nodes idle", 10*time.Minute, func() bool {
		return count(b, p.d.DB, `SELECT count(*) FROM nodes WHERE state = ?`, api.NodeIdle) >= nodes
	})
	ended := func() int {
		return count(b, p.d.DB, `SELECT count(*) FROM jobs WHERE compute = ? AND status = ?`, store.Key(id), api.JobCompleted)
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	b.ResetTimer()
	cpu0 := processCPU()
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for c := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				t := time.Now()
				_, err := p.c.PutJob(bctx, api.Job{Name: fmt.Sprintf("rate-%d-%d", c, i),
					Properties: api.JobProperties{Command: "true", ComputeID: "rate"}})
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	done := ended()
	cpu := processCPU() - cpu0
	b.StopTimer()
	if errs > 0 {
		b.Errorf("%d submits failed", errs)
	}
	b.ReportMetric(float64(len(lat))/dur.Seconds(), "submits/s")
	// On a loaded machine the rate is the share of the CPU this process
	// got; the CPU each job took (the control plane, the clients and,
	// unless SCALE_SIM_PROCESS, the simulated agents) is the figure that
	// moves with the code.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(max(done, 1)), "cpu-ms/job")
	b.ReportMetric(float64(done)/dur.Seconds(), "ended/s")
	reportLatency(b, "submit-", lat)
	b.ReportMetric(0, "ns/op")
}
