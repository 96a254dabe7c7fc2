// Package ha runs the control plane as several replicas on one private
// PostgreSQL (internal/pgtest) and kills the leader with SIGKILL while
// jobs run on local nodes: no job may be lost or run twice.
package ha

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/pgtest"
	"github.com/cumulus-ml/cumulus/internal/replica"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/testbin"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cumulus-ha-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, _, err = testbin.Cumulus(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// Figures of the failover test; a shorter run (CUMULUS_HA_JOBS) is for
// trying changes.
const (
	leaderLease = 3 * time.Second
	kills       = 5
)

// plane is the replicas of one control plane: one store, one shared data
// dir, a port each.
type plane struct {
	t       *testing.T
	dsn     string
	dataDir string
	urls    []string
	procs   []*exec.Cmd
	logs    []*os.File
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func newPlane(t *testing.T, n int) *plane {
	p := &plane{t: t, dsn: pgtest.DSN(t), dataDir: t.TempDir(), procs: make([]*exec.Cmd, n), logs: make([]*os.File, n)}
	for range n {
		p.urls = append(p.urls, "http://"+freeAddr(t))
	}
	t.Cleanup(func() {
		for i := range p.procs {
			p.stop(i)
		}
		killAgents(p.dataDir)
		if t.Failed() {
			for i := range p.procs {
				b, _ := os.ReadFile(p.logPath(i))
				t.Logf("replica %d log (tail):\n%s", i, tail(string(b), 6000))
			}
		}
	})
	return p
}

func (p *plane) logPath(i int) string {
	return filepath.Join(p.dataDir, fmt.Sprintf("serve-%d.log", i))
}

// start starts replica i and waits until it answers.
func (p *plane) start(i int) {
	p.t.Helper()
	f, err := os.OpenFile(p.logPath(i), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--listen", strings.TrimPrefix(p.urls[i], "http://"), "--data-dir", p.dataDir,
		"--store", p.dsn, "--replicas", strings.Join(p.urls, ","), "--leader-lease", leaderLease.String(),
		// Short enough that the run depends on heartbeats heard by any
		// replica reaching the leader (else nodes would be lost, jobs rerun).
		"--heartbeat-timeout", "15s")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(p.dataDir, "config.yaml"), "CUMULUS_ISOLATE_JOBS=false")
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.procs[i], p.logs[i] = cmd, f
	c := p.client(p.urls[i])
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ListComputes(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("replica %d did not come up", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *plane) stop(i int) {
	cmd := p.procs[i]
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	p.logs[i].Close()
}

// kill9 kills replica i with SIGKILL.
func (p *plane) kill9(i int) {
	_ = p.procs[i].Process.Signal(syscall.SIGKILL)
	_ = p.procs[i].Wait()
	p.logs[i].Close()
}

// client talks to the given servers (a comma-separated list) as the admin.
func (p *plane) client(servers string) *client.Client {
	p.t.Helper()
	var cfg config.CLI
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		cfg, err = config.Load(filepath.Join(p.dataDir, "config.yaml"))
		if err == nil && cfg.Token != "" {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no CLI config: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg.Server = servers
	c, err := client.New(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	c.PollEvery = 100 * time.Millisecond
	return c
}

// leader is the index of the replica holding the controllers' lease, and
// the lease's token.
func (p *plane) leader(db *store.DB) (int, int64, bool) {
	l, err := store.GetLease(context.Background(), db.Q(), replica.LeaseName)
	if err != nil || !l.Expires.After(time.Now()) {
		return -1, 0, false
	}
	parts := strings.Split(l.Holder, "/")
	if len(parts) < 2 {
		return -1, 0, false
	}
	pid, _ := strconv.Atoi(parts[1])
	for i, cmd := range p.procs {
		if cmd != nil && cmd.ProcessState == nil && cmd.Process.Pid == pid {
			return i, l.Token, true
		}
	}
	return -1, l.Token, false
}

// TestLeaderKilledFiveTimes: three replicas on one PostgreSQL run 500
// short jobs on local nodes while the replica running the controllers is
// killed with SIGKILL five times (and started again). Every job ends
// Completed, each ran exactly once (its mark file has one line), and the
// takeover times and the longest API outage a failing-over client saw
// are reported.
func TestLeaderKilledFiveTimes(t *testing.T) {
	jobs := 500
	if v, err := strconv.Atoi(os.Getenv("CUMULUS_HA_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	p := newPlane(t, 3)
	p.start(0)
	p.start(1)
	p.start(2)
	c := p.client(strings.Join(p.urls, ","))
	ctx := context.Background()
	db, err := store.OpenPostgres(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	comp := api.Compute{Name: "hacluster"}
	comp.Properties.ComputeType = api.ComputeTypeAml
	minN, maxN := int32(0), int32(4)
	comp.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &minN, MaxNodeCount: &maxN, NodeIdleTimeBeforeScaleDown: "PT60S"}
	_, resp, err := c.PutCompute(ctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, resp, nil); err != nil {
		t.Fatal(err)
	}

	marks := t.TempDir()
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	// The API as a client sees it, through the kills: the longest time
	// between two answered requests.
	probeCtx, stopProbe := context.WithCancel(ctx)
	var outage time.Duration
	var probeWG sync.WaitGroup
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		pc := p.client(strings.Join(p.urls, ","))
		pc.HTTP.Timeout = 2 * time.Second
		last := time.Now()
		for probeCtx.Err() == nil {
			if _, err := pc.GetCompute(probeCtx, "hacluster"); err == nil {
				now := time.Now()
				outage = max(outage, now.Sub(last))
				last = now
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	submitted := make(chan int, jobs)
	go func() {
		defer close(submitted)
		sc := p.client(strings.Join(p.urls, ","))
		for i := range jobs {
			name := fmt.Sprintf("job-%03d", i)
			j := api.Job{Name: name, Properties: api.JobProperties{ComputeID: "hacluster",
				Command: fmt.Sprintf("echo ran >> %s/%s", marks, name)}}
			for {
				if _, err := sc.PutJob(ctx, j); err == nil {
					break
				} else if !retryable(err) {
					t.Errorf("submit %s: %v", name, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			submitted <- i
		}
	}()

	var takeovers []time.Duration
	for k := range kills {
		// Kill when a further share of the jobs is done.
		want := jobs * (k + 1) / (kills + 2)
		waitUntil(t, fmt.Sprintf("%d jobs done before kill %d", want, k+1), 5*time.Minute, func() bool { return doneJobs(t, db) >= want })
		var victim int
		var token int64
		waitUntil(t, "a leader", 30*time.Second, func() bool {
			var ok bool
			victim, token, ok = p.leader(db)
			return ok
		})
		killed := time.Now()
		p.kill9(victim)
		waitUntil(t, "a new leader", 30*time.Second, func() bool {
			i, tok, ok := p.leader(db)
			return ok && tok > token && i != victim
		})
		takeovers = append(takeovers, time.Since(killed))
		t.Logf("kill %d: replica %d (token %d) killed with %d jobs done; a new leader after %v", k+1, victim, token, doneJobs(t, db), takeovers[k])
		p.start(victim)
	}
	for range submitted {
	}
	waitUntil(t, "every job terminal", 10*time.Minute, func() bool { return doneJobs(t, db) >= jobs })
	stopProbe()
	probeWG.Wait()

	all, err := c.ListJobs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]int{}
	for _, j := range all {
		byStatus[j.Properties.Status]++
	}
	if len(all) != jobs || byStatus[api.JobCompleted] != jobs {
		t.Errorf("%d jobs listed, by status %v; want %d Completed", len(all), byStatus, jobs)
	}
	twice, never := 0, 0
	for i := range jobs {
		b, err := os.ReadFile(filepath.Join(marks, fmt.Sprintf("job-%03d", i)))
		switch {
		case errors.Is(err, os.ErrNotExist):
			never++
		case err != nil:
			t.Fatal(err)
		case strings.Count(string(b), "ran") != 1:
			twice++
			t.Errorf("job-%03d ran %d times", i, strings.Count(string(b), "ran"))
		}
	}
	if never > 0 || twice > 0 {
		t.Errorf("%d jobs never ran, %d ran more than once", never, twice)
	}
	slices.Sort(takeovers)
	t.Logf("FIGURES: %d jobs, %d leader kills: takeover p50 %v, p99 %v (max); longest API outage seen by a client %v; jobs lost 0 of %d, run twice %d",
		jobs, kills, takeovers[len(takeovers)/2].Round(time.Millisecond), takeovers[len(takeovers)-1].Round(time.Millisecond),
		outage.Round(time.Millisecond), jobs, twice)
}

// doneJobs counts terminal jobs in the store.
func doneJobs(t *testing.T, db *store.DB) int {
	counts, err := store.AllJobCounts(context.Background(), db.Q())
	if err != nil {
		t.Logf("job counts: %v", err)
		return 0
	}
	n := 0
	for _, c := range counts {
		if api.JobTerminal(c.State) {
			n += c.N
		}
	}
	return n
}

// retryable: the request may go again (no replica answered, or one
// answered that it is unavailable).
func retryable(err error) bool {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	return true
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for time to pass
	}
}

// killAgents kills the local nodes' agents the replicas started (they
// outlive the control plane by design).
func killAgents(dataDir string) {
	nodesDir := config.NodesDir(dataDir)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, " agent ") && strings.Contains(cmd, " "+nodesDir+"/") {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
