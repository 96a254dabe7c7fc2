package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

// BenchmarkVersusSlurm runs the same work on Cumulus and on Slurm, side by
// side on this machine, and prints both figures and their ratio.
//
// Cumulus is `cumulus serve` (the binary of CUMULUS_TEST_BINARY, else one
// built here) with the local provider: VS_SLOTS (64) nodes, each a real
// agent (all of them in the compute's node host process) running one job
// at a time, kept up (minimum = maximum) so that no node starts during a
// run; jobs isolated as by default (as root: a user of its own per node,
// in a mount namespace). Slurm is Debian's
// slurm-wlm, slurmctld and one slurmd with VS_SLOTS CPUs, tuned as its
// high-throughput guide says (see slurm_test.go). Both run on loopback.
//
// The work: VS_JOBS (5,000) jobs of `true`, submitted by VS_SUBMITTERS (8)
// parallel submitters, each one after the other. Three runs make a round:
// Cumulus with each job submitted over REST (the Go client, connections
// kept), Cumulus with each job submitted by its own `cumulus job create`
// process, and Slurm with each job submitted by its own `sbatch`
// process. The machine is shared and its load changes, so the runs are
// interleaved, VS_ROUNDS (3) rounds, the order reversed every other round,
// and each round's ratio is of runs minutes apart. VS_SYSTEMS runs a subset
// (e.g. cumulus-rest), to profile one side.
//
// VS_RATE, when set, paces the submits instead: job i is due at i/VS_RATE
// seconds from the start, the submitters take the jobs as they come due,
// and a submit's latency counts from when it was due (a submit that waits
// for a free submitter waits in its latency). At a rate both systems keep
// up with, the latencies compare the submit paths at the same load; the
// default, each submitter submitting as fast as it can, loads each system
// with as much work as it takes in, so its latencies are those of a
// machine as busy as that system makes it.
//
// Figures, per run:
//
//   - jobs/s end to end: jobs over the time from the first submit to the
//     last job ended (the system's own count: Cumulus's job gauge,
//     slurmctld's statistics, polled every 100 ms);
//
//   - submit latency p50/p99, each submit as its submitter waited for it;
//
//   - CPU per job of the daemons and jobs: the CPU time of each system's
//     cgroups over the run (Cumulus: the server, and the agents with
//     their jobs; Slurm: slurmctld, munged, and slurmd with its
//     slurmstepds and jobs) over the jobs; and of the node side alone
//     (the agents with their jobs; slurmd, slurmstepd and jobs);
//
//   - CPU per CLI submit: the user and system time of each `cumulus job
//     create` or `sbatch` process (wait4's rusage);
//
//   - memory: the most RSS and PSS that the system's processes (daemons,
//     per-job helpers such as slurmstepd, the jobs) held at once,
//     sampled every second;
//
// and once, with every node up and idle: the memory of each system for
// VS_SLOTS slots, RSS and PSS summed over its processes.
//
//	CUMULUS_TEST_BINARY=/tmp/cumulus go test ./test/scale/ -run '^$' -bench VersusSlurm -benchtime 1x -timeout 60m
func BenchmarkVersusSlurm(b *testing.B) {
	jobs, slots, submitters, rounds := env("VS_JOBS", 5000), env("VS_SLOTS", 64), env("VS_SUBMITTERS", 8), env("VS_ROUNDS", 3)
	rate := env("VS_RATE", 0)
	groups := map[string]*cpuGroup{}
	for _, n := range []string{"cu-server", "cu-nodes", "sl-ctld", "sl-munge", "sl-node"} {
		groups[n] = newCPUGroup(b, n)
	}
	sl := startSlurm(b, slots, groups["sl-ctld"], groups["sl-munge"], groups["sl-node"])
	cu := startCumulus(b, slots, groups["cu-server"], groups["cu-nodes"])

	// Memory with every slot ready and nothing running.
	mem := func(names ...string) (rss, pss, procs int) {
		for _, n := range names {
			r, p, c := groups[n].memory()
			rss, pss, procs = rss+r, pss+p, procs+c
		}
		return
	}
	cuRSS, cuPSS, cuProcs := mem("cu-server", "cu-nodes")
	nodeRSS, nodePSS, _ := mem("cu-nodes")
	slRSS, slPSS, slProcs := mem("sl-ctld", "sl-munge", "sl-node")
	slNodeRSS, slNodePSS, _ := mem("sl-node")

	systems := map[string]system{
		"cumulus-rest": {submit: cu.restSubmit, ended: cu.ended, daemons: []*cpuGroup{groups["cu-server"], groups["cu-nodes"]}, node: groups["cu-nodes"]},
		"cumulus-cli":  {submit: cu.cliSubmit, ended: cu.ended, daemons: []*cpuGroup{groups["cu-server"], groups["cu-nodes"]}, node: groups["cu-nodes"]},
		"slurm":        {submit: sl.sbatch, ended: sl.ended, daemons: []*cpuGroup{groups["sl-ctld"], groups["sl-munge"], groups["sl-node"]}, node: groups["sl-node"]},
	}
	order := []string{"slurm", "cumulus-rest", "cumulus-cli"}
	if v := os.Getenv("VS_SYSTEMS"); v != "" { // a subset, for a profile of one side
		order = strings.Split(v, ",")
	}
	results := map[string][]result{}
	b.ResetTimer()
	for r := range rounds {
		o := slices.Clone(order)
		if r%2 == 1 {
			slices.Reverse(o)
		}
		for _, name := range o {
			res := run(b, name, systems[name], fmt.Sprintf("r%d", r), jobs, submitters, rate)
			results[name] = append(results[name], res)
			fmt.Printf("round %d %-13s %7.1f jobs/s  submit p50 %6.1f ms p99 %6.1f ms  CPU/job %5.2f ms (node %5.2f ms)  CPU/CLI submit %5.2f ms  peak PSS %4.0f MiB  load %.1f\n",
				r+1, name, res.rate, ms(res.p50), ms(res.p99), ms(res.cpuPerJob), ms(res.nodePerJob), ms(res.cliPerSubmit), float64(res.peakPSS)/1024, res.load)
		}
	}
	b.StopTimer()

	pace := "each as fast as it can"
	if rate > 0 {
		pace = fmt.Sprintf("paced at %d submits a second", rate)
	}
	fmt.Printf("\n%d jobs of `true`, %d slots, %d parallel submitters %s, %d rounds interleaved (ranges over the rounds; ratio: median of each round's ratio)\n",
		jobs, slots, submitters, pace, rounds)
	fmt.Printf("%-34s %-24s %-24s %-24s %-12s %-12s\n", "figure", "Cumulus (REST)", "Cumulus (CLI)", "Slurm (sbatch)", "REST/Slurm", "CLI/Slurm")
	row := func(what string, f func(result) float64, format string) {
		cells := []string{}
		for _, n := range []string{"cumulus-rest", "cumulus-cli", "slurm"} {
			vals := []float64{}
			for _, res := range results[n] {
				vals = append(vals, f(res))
			}
			cells = append(cells, span(vals, format))
		}
		ratio := func(a string) string {
			var rs []float64
			for i := range min(len(results[a]), len(results["slurm"])) {
				if s := f(results["slurm"][i]); s > 0 {
					rs = append(rs, f(results[a][i])/s)
				}
			}
			if len(rs) == 0 {
				return "-"
			}
			slices.Sort(rs)
			return fmt.Sprintf("%.2f×", rs[len(rs)/2])
		}
		fmt.Printf("%-34s %-24s %-24s %-24s %-12s %-12s\n", what, cells[0], cells[1], cells[2], ratio("cumulus-rest"), ratio("cumulus-cli"))
	}
	row("jobs/s end to end", func(r result) float64 { return r.rate }, "%.1f")
	row("submit p50 (ms)", func(r result) float64 { return ms(r.p50) }, "%.1f")
	row("submit p99 (ms)", func(r result) float64 { return ms(r.p99) }, "%.1f")
	row("CPU per job, daemons+job (ms)", func(r result) float64 { return ms(r.cpuPerJob) }, "%.2f")
	row("CPU per job, node side (ms)", func(r result) float64 { return ms(r.nodePerJob) }, "%.2f")
	row("CPU per CLI submit (ms)", func(r result) float64 { return ms(r.cliPerSubmit) }, "%.2f")
	row("peak memory running, RSS (MiB)", func(r result) float64 { return float64(r.peakRSS) / 1024 }, "%.0f")
	row("peak memory running, PSS (MiB)", func(r result) float64 { return float64(r.peakPSS) / 1024 }, "%.0f")
	row("  node side per slot, PSS (MiB)", func(r result) float64 { return float64(r.peakNodePSS) / 1024 / float64(slots) }, "%.2f")
	fmt.Printf("%-34s %-49s %-24s\n", fmt.Sprintf("memory for %d idle slots, RSS / PSS", slots),
		fmt.Sprintf("%.0f / %.0f MiB (%d processes)", float64(cuRSS)/1024, float64(cuPSS)/1024, cuProcs),
		fmt.Sprintf("%.0f / %.0f MiB (%d processes)", float64(slRSS)/1024, float64(slPSS)/1024, slProcs))
	fmt.Printf("%-34s %-49s %-24s\n", "  of it the node side, per slot",
		fmt.Sprintf("%.2f / %.2f MiB", float64(nodeRSS)/1024/float64(slots), float64(nodePSS)/1024/float64(slots)),
		fmt.Sprintf("%.2f / %.2f MiB", float64(slNodeRSS)/1024/float64(slots), float64(slNodePSS)/1024/float64(slots)))

	med := func(n string, f func(result) float64) float64 {
		var v []float64
		for _, r := range results[n] {
			v = append(v, f(r))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, n := range []string{"cumulus-rest", "cumulus-cli", "slurm"} {
		if len(results[n]) == 0 {
			continue
		}
		b.ReportMetric(med(n, func(r result) float64 { return r.rate }), n+"-jobs/s")
		b.ReportMetric(med(n, func(r result) float64 { return ms(r.p50) }), n+"-submit-p50-ms")
		b.ReportMetric(med(n, func(r result) float64 { return ms(r.p99) }), n+"-submit-p99-ms")
		b.ReportMetric(med(n, func(r result) float64 { return ms(r.cpuPerJob) }), n+"-cpu/job-ms")
	}
	b.ReportMetric(float64(cuPSS)/1024, "cumulus-pss-MiB")
	b.ReportMetric(float64(slPSS)/1024, "slurm-pss-MiB")
	b.ReportMetric(0, "ns/op")
}

// system is one side of the comparison.
type system struct {
	// submit submits job number i of a run named tag and returns the CPU
	// time its CLI process used (0 over REST).
	submit func(tag string, i int) (time.Duration, error)
	// ended counts the jobs that have ended, completed and otherwise.
	ended   func() (completed, other int, err error)
	daemons []*cpuGroup
	node    *cpuGroup
}

type result struct {
	rate, load            float64
	p50, p99              time.Duration
	cpuPerJob, nodePerJob time.Duration
	cliPerSubmit          time.Duration
	// The most memory the system's processes held at once (sampled every
	// second while the jobs ran), all of them and the node side, KiB.
	peakRSS, peakPSS, peakNodePSS int
}

// run submits jobs through s from submitters in parallel, as fast as they
// can or, with rate > 0, each job when it is due, and waits until they
// have all ended.
func run(b *testing.B, name string, s system, tag string, jobs, submitters, rate int) result {
	b.Helper()
	done0, other0, err := s.ended()
	if err != nil {
		b.Fatal(err)
	}
	cpu := func(gs []*cpuGroup) (t time.Duration) {
		for _, g := range gs {
			t += g.usage()
		}
		return t
	}
	cpu0, node0 := cpu(s.daemons), s.node.usage()
	var (
		mu        sync.Mutex
		lat       []time.Duration
		cli       time.Duration
		submitErr error
		wg        sync.WaitGroup
	)
	start := time.Now()
	next := make(chan int, jobs)
	due := func(int) time.Time { return time.Now() }
	if rate > 0 {
		due = func(i int) time.Time { return start.Add(time.Duration(i) * time.Second / time.Duration(rate)) }
		go func() {
			for i := range jobs {
				time.Sleep(time.Until(due(i)))
				next <- i
			}
			close(next)
		}()
	} else {
		for i := range jobs {
			next <- i
		}
		close(next)
	}
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	var peakRSS, peakPSS, peakNodePSS int
	go func() {
		defer close(sampled)
		for {
			rss, pss := 0, 0
			for _, g := range s.daemons {
				r, p, _ := g.memory()
				rss, pss = rss+r, pss+p
			}
			_, nodePSS, _ := s.node.memory()
			peakRSS, peakPSS, peakNodePSS = max(peakRSS, rss), max(peakPSS, pss), max(peakNodePSS, nodePSS)
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	for range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := due(i)
				c, err := s.submit(tag, i)
				d := time.Since(t)
				mu.Lock()
				lat = append(lat, d)
				cli += c
				if err != nil && submitErr == nil {
					submitErr = err
				}
				mu.Unlock()
			}
		}()
	}
	var finished time.Time
	for {
		done, other, err := s.ended()
		if err != nil {
			b.Fatal(err)
		}
		if other > other0 {
			b.Fatalf("%s: %d jobs did not complete", name, other-other0)
		}
		if done-done0 >= jobs {
			finished = time.Now()
			break
		}
		if time.Since(start) > 20*time.Minute {
			b.Fatalf("%s: %d of %d jobs ended after 20 minutes", name, done-done0, jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	if submitErr != nil {
		b.Fatalf("%s: submit: %v", name, submitErr)
	}
	el := finished.Sub(start)
	res := result{
		rate:       float64(jobs) / el.Seconds(),
		p50:        pctDur(lat, 0.50),
		p99:        pctDur(lat, 0.99),
		cpuPerJob:  (cpu(s.daemons) - cpu0) / time.Duration(jobs),
		nodePerJob: (s.node.usage() - node0) / time.Duration(jobs),
		load:       loadAvg(),
		peakRSS:    peakRSS, peakPSS: peakPSS, peakNodePSS: peakNodePSS,
	}
	if cli > 0 {
		res.cliPerSubmit = cli / time.Duration(jobs)
	}
	time.Sleep(2 * time.Second) // what is left of this run (Slurm's purge, logs) settles before the next
	return res
}

func pctDur(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// span is a range of values as "a–b" ("a" when they are one).
func span(v []float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format+"–"+format, lo, hi)
}

// loadAvg is the machine's one-minute load average.
func loadAvg() float64 {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// rusageCPU is the user and system time of a finished process.
func rusageCPU(ps *os.ProcessState) time.Duration {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return 0
}

// devNull is where the CLI processes' output goes.
var devNull = func() *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	return f
}()

// cumulus is a `cumulus serve` process with the local provider.
type cumulus struct {
	bin, dataDir, config, metrics string
	c                             *client.Client
	cmd                           *exec.Cmd
	http                          *http.Client
}

// startCumulus starts `cumulus serve` in group server and a compute of
// slots nodes, waits for them to be idle and moves their agents to group
// nodes (their jobs follow them there).
func startCumulus(b *testing.B, slots int, server, nodes *cpuGroup) *cumulus {
	b.Helper()
	tmp, err := os.MkdirTemp("", "cumulus-vs-")
	if err != nil {
		b.Fatal(err)
	}
	bin, built, err := testbin.Cumulus(tmp)
	if err != nil {
		b.Fatal(err)
	}
	if built {
		b.Logf("built %s (set %s to use another)", bin, testbin.Env)
	}
	cu := &cumulus{bin: bin, dataDir: filepath.Join(tmp, "data"), http: &http.Client{Timeout: 10 * time.Second}}
	cu.config = filepath.Join(cu.dataDir, "config.yaml")
	b.Cleanup(func() {
		if cu.cmd != nil {
			_ = cu.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cu.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cu.cmd.Process.Kill()
				<-done
			}
		}
		testbin.KillAgents(cu.dataDir)
		os.RemoveAll(tmp)
		os.RemoveAll(config.NodesDir(cu.dataDir))
	})
	listen, metrics := freeAddr(b), freeAddr(b)
	cu.metrics = "http://" + metrics + "/metrics"
	log, err := os.Create(filepath.Join(tmp, "serve.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cu.cmd = server.command(bin, "serve", "--listen", listen, "--data-dir", cu.dataDir, "--metrics-listen", metrics)
	cu.cmd.Stdout, cu.cmd.Stderr = log, log
	if err := cu.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "cumulus serve", time.Minute, func() bool {
		cfg, err := config.Load(cu.config)
		if err != nil || cfg.Token == "" {
			return false
		}
		if cu.c, err = client.New(cfg); err != nil {
			return false
		}
		_, err = cu.c.ListComputes(bctx)
		return err == nil
	})
	cu.c.HTTP.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	cu.c.PollEvery = 100 * time.Millisecond
	c := api.Compute{Name: "vsc"}
	c.Properties.ComputeType = api.ComputeTypeAml
	n := int32(slots)
	c.Aml().VMSize = "Standard_D2_v2"
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &n, MaxNodeCount: &n, NodeIdleTimeBeforeScaleDown: "PT1H"}
	_, resp, err := cu.c.PutCompute(bctx, c)
	if err != nil {
		b.Fatal(err)
	}
	if err := cu.c.Wait(bctx, resp, nil); err != nil {
		b.Fatal(err)
	}
	var ids []string
	waitFor(b, fmt.Sprintf("%d idle nodes", slots), 5*time.Minute, func() bool {
		ns, err := cu.c.ListNodes(bctx, "vsc")
		if err != nil {
			return false
		}
		ids = ids[:0]
		for _, nd := range ns {
			if nd.NodeState == api.NodeIdle {
				ids = append(ids, nd.NodeID)
			}
		}
		return len(ids) == slots
	})
	if running := testbin.RunningNodes(cu.dataDir); len(running) != slots {
		b.Fatalf("%d nodes' agents run, want %d", len(running), slots)
	}
	// The agent processes: the compute's node host, whose nodes' jobs
	// follow it into the group.
	agents := testbin.Agents(cu.dataDir)
	for _, pid := range agents {
		if err := nodes.add(pid); err != nil {
			b.Fatal(err)
		}
	}
	if nodes.v2 { // on cgroup v2 an agent runs its jobs in its node's cgroup
		for _, id := range ids {
			nodes.extra = append(nodes.extra, filepath.Join("/sys/fs/cgroup/cumulus", id))
		}
	}
	return cu
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (cu *cumulus) restSubmit(tag string, i int) (time.Duration, error) {
	_, err := cu.c.PutJob(bctx, api.Job{Name: fmt.Sprintf("%s-rest-%d", tag, i),
		Properties: api.JobProperties{Command: "true", ComputeID: "vsc"}})
	return 0, err
}

// cliSubmit submits one job with `cumulus job create` as a user would.
func (cu *cumulus) cliSubmit(tag string, i int) (time.Duration, error) {
	cmd := exec.Command(cu.bin, "job", "create", "--name", fmt.Sprintf("%s-cli-%d", tag, i), "--compute", "vsc", "--command", "true")
	cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+cu.config)
	cmd.Stdout = devNull
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("cumulus job create: %w: %s", err, stderr.String())
	}
	return rusageCPU(cmd.ProcessState), nil
}

// ended reads the compute's job counts from the server's metrics.
func (cu *cumulus) ended() (completed, other int, err error) {
	ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cu.metrics, nil)
	resp, err := cu.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cumulus_jobs{") || !strings.Contains(line, `compute="vsc"`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		n, _ := strconv.ParseFloat(line[i+1:], 64)
		switch {
		case strings.Contains(line, `status="Completed"`):
			completed += int(n)
		case strings.Contains(line, `status="Failed"`), strings.Contains(line, `status="Canceled"`):
			other += int(n)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return completed, other, sc.Err()
}
