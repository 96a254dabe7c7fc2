package cli

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// Jobs on a tagged cluster that grows from zero and shrinks back: the cost
// report equals the nodes' lives (from the event history) × the price, to
// the cent, by compute; each job's cost is its attempt's time on its nodes
// × the price; by tag, the job's tag wins over its compute's. The price
// file makes 10 ms cost a cent, so the comparison means something (the
// history and the ledger each keep times to the millisecond).
func TestCostReportMatchesNodeLives(t *testing.T) {
	prices := filepath.Join(t.TempDir(), "prices.yaml")
	const perHour = 3600.0 // a cent per 10 ms
	os.WriteFile(prices, []byte("currency: USD\nsizes:\n  Standard_DS3_v2: {dedicated: 3600}\n"), 0o600)
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration, o.PriceFile = "sim", 200*time.Millisecond, prices
	})
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "2", "--idle-time-before-scale-down", "1", "--tags", "team=vision")
	cli("job", "create", "-n", "a", "--compute", "cpu", "--command", "true", "--tags", "team=nlp")
	cli("job", "create", "-n", "b", "--compute", "cpu", "--command", "true", "--instance-count", "2")
	cli("job", "stream", "-n", "a")
	cli("job", "stream", "-n", "b")

	// Wait for the cluster to be back at zero: every node removed.
	var lives float64 // node-hours from the history
	deadline := time.Now().Add(30 * time.Second)
	for {
		var evs []api.Event
		json.Unmarshal([]byte(cli("compute", "events", "-n", "cpu", "--top", "0", "-o", "json")), &evs)
		requested, removed := 0, 0
		lives = 0
		for _, e := range evs {
			switch e.Type {
			case api.EventNodeRequested:
				requested++
			case api.EventNodeRemoved:
				removed++
				lives += *e.DurationSeconds / 3600
			}
		}
		if requested > 0 && removed == requested {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes not all removed after 30 s: %d requested, %d removed", requested, removed)
		}
		time.Sleep(100 * time.Millisecond) // polling a real server
	}

	var r api.CostReport
	json.Unmarshal([]byte(cli("cost", "show", "--since", "1h", "-o", "json")), &r)
	if len(r.Rows) != 1 || r.Rows[0].Key != "cpu" || r.Currency != "USD" || !sameCents(r.Total.Cost, lives*perHour) {
		t.Fatalf("by compute: %+v; want cpu costing %.2f (%.6f node-hours from the history)", r, lives*perHour, lives)
	}
	if math.Abs(r.Total.BusyNodeHours+r.Total.IdleNodeHours-r.Total.NodeHours) > 1e-9 || r.Total.BusyNodeHours <= 0 || r.Total.IdleNodeHours <= 0 {
		t.Errorf("busy %v + idle %v != billed %v", r.Total.BusyNodeHours, r.Total.IdleNodeHours, r.Total.NodeHours)
	}

	r = api.CostReport{}
	json.Unmarshal([]byte(cli("cost", "show", "--by", "job", "--since", "1h", "-o", "json")), &r)
	byKey := map[string]api.CostRow{}
	for _, x := range r.Rows {
		byKey[x.Key] = x
	}
	for _, name := range []string{"a", "b"} {
		var j JobView
		json.Unmarshal([]byte(cli("job", "show", "-n", name, "-o", "json")), &j)
		held := 0.0
		for _, at := range j.Attempts {
			held += at.Ended.Sub(*at.Assigned).Hours() * float64(len(at.Nodes))
		}
		if held == 0 || !sameCents(byKey[name].Cost, held*perHour) {
			t.Errorf("job %s costs %.2f, want %.2f (%v node-hours held)", name, byKey[name].Cost, held*perHour, held)
		}
	}
	if byKey[cost.IdleRow].Cost <= 0 {
		t.Errorf("no idle row: %+v", r.Rows)
	}

	jobA := byKey["a"].Cost
	r = api.CostReport{}
	json.Unmarshal([]byte(cli("cost", "show", "--by", "tag:team", "--since", "1h", "-o", "json")), &r)
	byKey = map[string]api.CostRow{}
	for _, x := range r.Rows {
		byKey[x.Key] = x
	}
	if !sameCents(byKey["nlp"].Cost, jobA) || byKey["vision"].Cost <= 0 || byKey[cost.UntaggedRow].Cost != 0 {
		t.Errorf("by tag team: %+v, want nlp (job a) and vision (the rest)", r.Rows)
	}

	out := cli("cost", "show", "--since", "1h", "-o", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 2 || recs[0][0] != "key" || recs[1][0] != "cpu" {
		t.Errorf("csv: %v %q", err, out)
	}
	if out := cli("-o", "table", "cost", "show", "--since", "1h"); !strings.Contains(out, "COST (USD)") || !strings.Contains(out, "total") {
		t.Errorf("table:\n%s", out)
	}
	for _, args := range [][]string{{"cost", "show", "--by", "colour"}, {"cost", "show", "--since", "last week"}, {"cost", "show", "-o", "xml"},
		{"cost", "show", "--since", "1h", "--until", "2h"}} {
		_, errOut, code := run(t, append([]string{"--config", cfg}, args...)...)
		if code == 0 || !strings.HasPrefix(errOut, "error: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one error line", args, code, errOut)
		}
	}
}

// sameCents: equal to the cent (less than half of one apart).
func sameCents(a, b float64) bool { return math.Abs(a-b) < 0.005 }

// compute simulate of a cluster's own history, with the delays its nodes
// had (read from its history), costs what the cluster really cost: within
// 1 % beyond what the model leaves out, which a busy machine makes larger —
// each node's own provision and deletion delays against the median the
// simulation uses, the spread it draws, how late the controller took an
// idle node away, and how long nodes were held around their jobs' runs.
func TestSimulateReproducesRealCost(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Provider, o.SimJobDuration = "sim", time.Second
	})
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "cpu", "--max-instances", "2", "--idle-time-before-scale-down", "2")
	for i := range 6 {
		cli("job", "create", "-n", fmt.Sprintf("j%d", i), "--compute", "cpu", "--command", "true")
	}
	deadline := time.Now().Add(60 * time.Second)
	var evs []api.Event
	var jobs []JobView
	for {
		evs = nil
		json.Unmarshal([]byte(cli("compute", "events", "-n", "cpu", "--top", "0", "-o", "json")), &evs)
		req, rem := 0, 0
		for _, e := range evs {
			req += btoi(e.Type == api.EventNodeRequested)
			rem += btoi(e.Type == api.EventNodeRemoved)
		}
		jobs = nil
		json.Unmarshal([]byte(cli("job", "list", "-o", "json")), &jobs)
		done := 0
		for _, j := range jobs {
			done += btoi(j.Status == api.JobCompleted)
		}
		if done == 6 && req > 0 && rem == req {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after 60 s: %d jobs completed, %d nodes requested, %d removed", done, req, rem)
		}
		time.Sleep(200 * time.Millisecond) // polling a real server
	}
	var real api.CostReport
	json.Unmarshal([]byte(cli("cost", "show", "--since", "1h", "-o", "json")), &real)
	var simulated struct {
		Total struct {
			CostUSD float64 `json:"costUsd"`
		} `json:"total"`
	}
	out := cli("compute", "simulate", "-n", "cpu", "-o", "json")
	if err := json.Unmarshal([]byte(out), &simulated); err != nil {
		t.Fatalf("simulate -o json: %v\n%s", err, out)
	}
	if real.Total.Cost <= 0 || real.Total.NodeHours <= 0 {
		t.Fatalf("real cost %+v", real.Total)
	}
	slack := (irregularity(evs, 2*time.Second) + heldBeyondRuns(evs, jobs)) / 3600 * real.Total.Cost / real.Total.NodeHours
	bound := 0.01*real.Total.Cost + slack
	if diff := math.Abs(simulated.Total.CostUSD - real.Total.Cost); diff > bound {
		t.Errorf("simulated %.6f USD, real %.6f USD: %.6f apart, more than 1 %% beyond the run's irregularity (%.6f USD)",
			simulated.Total.CostUSD, real.Total.Cost, diff, slack)
	}
}

// irregularity is the node-seconds a simulation of a cluster's history
// cannot reproduce: each node's provision and deletion delays against
// their medians (the simulation gives every node the median, provision
// drawn within a spread that is counted too), and how long after its idle
// time each idle node was taken away (the simulation removes it then).
// evs are in the order `compute events -o json` prints them: oldest first.
func irregularity(evs []api.Event, idle time.Duration) float64 {
	var ready, gone, late []float64
	idleAt, leaving := map[string]time.Time{}, map[string]time.Time{}
	for _, e := range evs {
		switch e.Type {
		case api.EventNodeReady:
			if e.DurationSeconds != nil {
				ready = append(ready, *e.DurationSeconds)
			}
		case api.EventNodeIdle:
			idleAt[e.Node] = e.Time
		case api.EventNodeLeaving:
			leaving[e.Node] = e.Time
			if at, ok := idleAt[e.Node]; ok {
				late = append(late, max(e.Time.Sub(at.Add(idle)).Seconds(), 0))
			}
		case api.EventNodeRemoved:
			if at, ok := leaving[e.Node]; ok {
				gone = append(gone, e.Time.Sub(at).Seconds())
			}
		}
	}
	off := func(xs []float64) (sum, spread float64) {
		if len(xs) == 0 {
			return 0, 0
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		med := s[(len(s)-1)/2]
		for _, x := range s {
			sum += math.Abs(x - med)
		}
		q := func(p float64) float64 { return s[int(p*float64(len(s)-1))] }
		return sum, min((q(0.9)-q(0.1))/2, med)
	}
	r, spread := off(ready)
	g, _ := off(gone)
	total := r + spread*float64(len(ready)) + g
	for _, l := range late {
		total += l
	}
	return total
}

// heldBeyondRuns is the node-seconds the jobs held their nodes beyond
// what a simulation replays: the simulation gives a queued job a free node
// at once, holds it for the job's run (started to ended) and frees it at
// the run's end. A real node also waits for the controller to give it the
// next queued job, is held from the assignment until the job starts, and
// from the job's end until the server has recorded it — each a few
// milliseconds on a quiet machine, much more on a busy one.
func heldBeyondRuns(evs []api.Event, jobs []JobView) float64 {
	free := map[string]time.Time{} // when each node was ready or last freed
	for _, e := range evs {
		if e.Type == api.EventNodeReady {
			free[e.Node] = e.Time
		}
	}
	type use struct {
		node                                    string
		queued, assigned, started, ended, freed time.Time
	}
	var uses []use
	for _, j := range jobs {
		if len(j.Attempts) == 0 || len(j.StatusHistory) == 0 {
			continue
		}
		a := j.Attempts[len(j.Attempts)-1]
		if a.Assigned == nil || a.Started == nil || a.Ended == nil {
			continue
		}
		freed := j.StatusHistory[len(j.StatusHistory)-1].Time // its end recorded
		for _, n := range a.Nodes {
			uses = append(uses, use{n, j.StatusHistory[0].Time, *a.Assigned, *a.Started, *a.Ended, freed})
		}
	}
	slices.SortFunc(uses, func(x, y use) int { return x.assigned.Compare(y.assigned) })
	total := 0.0
	for _, u := range uses {
		if at, ok := free[u.node]; ok {
			since := u.queued
			if at.After(since) {
				since = at
			}
			total += max(u.assigned.Sub(since).Seconds(), 0) // the node free, the job queued
		}
		total += max(u.started.Sub(u.assigned).Seconds(), 0) + max(u.freed.Sub(u.ended).Seconds(), 0)
		free[u.node] = u.freed
		total += 0.001 // the trace gives its submit time and duration to the millisecond
	}
	// A node's idle time counts from its last job's end in the simulation,
	// from its NodeIdle event in irregularity's lateness.
	lastIdle := map[string]time.Time{}
	for _, e := range evs {
		if e.Type == api.EventNodeIdle && e.Time.After(lastIdle[e.Node]) {
			lastIdle[e.Node] = e.Time
		}
	}
	for n, at := range lastIdle {
		if f, ok := free[n]; ok {
			total += max(at.Sub(f).Seconds(), 0)
		}
	}
	return total
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestObservedDelays(t *testing.T) {
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	secs := func(s float64) *float64 { return &s }
	evs := []api.Event{ // newest first, as the API gives them
		{Type: api.EventNodeRemoved, Node: "b", Time: t0.Add(70 * time.Second)},
		{Type: api.EventNodeLeaving, Node: "b", Time: t0.Add(60 * time.Second)},
		{Type: api.EventNodeRemoved, Node: "a", Time: t0.Add(34 * time.Second)},
		{Type: api.EventNodeLeaving, Node: "a", Time: t0.Add(30 * time.Second)},
		{Type: api.EventNodeReady, Node: "c", EventDetail: api.EventDetail{DurationSeconds: secs(50)}},
		{Type: api.EventNodeReady, Node: "b", EventDetail: api.EventDetail{DurationSeconds: secs(40)}},
		{Type: api.EventNodeReady, Node: "a", EventDetail: api.EventDetail{DurationSeconds: secs(30)}},
	}
	p, d, ok := observedDelays(evs)
	// Median 40 s, half the 10–90 % spread (30 to 40 s of three), and the
	// lower median of the removals (4 s and 10 s).
	if !ok || p != "40.000s±5.000s" || d != "4.000s" {
		t.Errorf("observed %q %q %v", p, d, ok)
	}
	if _, _, ok := observedDelays(nil); ok {
		t.Error("delays without a ready node")
	}
}

// mustRun runs CLI commands against the config's server, failing the test
// on a non-zero exit; it returns their standard output.
func mustRun(t *testing.T, cfg string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, append([]string{"--config", cfg}, args...)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
		return out
	}
}

// A cost under a cent keeps two significant digits instead of 0.00 (a
// short job on a small size costs fractions of a cent).
func TestSmallCostsKeepTheirDigits(t *testing.T) {
	for v, want := range map[float64]string{0.000557: "0.00056", 0.0042: "0.0042", 0: "0.00", 0.137: "0.14", 12.3456: "12.35", 0.0051: "0.01"} {
		if got := money(v); got != want {
			t.Errorf("money(%v) = %s, want %s", v, got, want)
		}
	}
	var out strings.Builder
	costTable(api.CostReport{Currency: "USD", Rows: []api.CostRow{{Key: "quick-job", Compute: "cpu", NodeHours: 0.004, Cost: 0.000557}},
		Total: api.CostRow{NodeHours: 0.004, Cost: 0.000557}}).print(&out)
	if strings.Count(out.String(), "0.00056") != 2 {
		t.Errorf("cost table:\n%s", out.String())
	}
}
