package cost

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

const cpuKey = "/subscriptions/s/resourcegroups/g/providers/microsoft.machinelearningservices/workspaces/ws/computes/cpu"

var t10 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t10.Add(time.Duration(min) * time.Minute) }

// Two Standard_DS3_v2 nodes ($0.293/h): n1 from 10:00 to 11:00, n2 from
// 10:00 and still there at 12:00. Job a holds n1 10:10–10:40, job c both
// nodes 10:45–10:55, job b n2 11:00–11:30.
func ledger() Input {
	return Input{
		Nodes: []store.NodeBill{
			{Node: "n1", Compute: cpuKey, VMSize: "Standard_DS3_v2", Priority: "Dedicated", Created: at(0), Removed: at(60)},
			{Node: "n2", Compute: cpuKey, VMSize: "Standard_DS3_v2", Priority: "Dedicated", Created: at(0)},
		},
		Runs: []store.JobRun{
			{Job: "ua", Attempt: 1, Name: "a", Compute: cpuKey, Nodes: []string{"n1"}, Started: at(10), Ended: at(40)},
			{Job: "uc", Attempt: 1, Name: "c", Compute: cpuKey, Nodes: []string{"n1", "n2"}, Started: at(45), Ended: at(55)},
			{Job: "ub", Attempt: 1, Name: "b", Compute: cpuKey, Nodes: []string{"n2"}, Started: at(60), Ended: at(90)},
		},
		Since: t10, Until: at(120), Prices: Catalog(),
		Computes: map[string]Compute{cpuKey: {Workspace: "ws", Name: "cpu", Tags: map[string]string{"team": "vision"}}},
		JobTags:  map[string]map[string]string{"ua": {"project": "x"}, "uc": {"team": "nlp"}},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func rowsByKey(r api.CostReport) map[string]api.CostRow {
	m := map[string]api.CostRow{}
	for _, x := range r.Rows {
		m[x.Key] = x
	}
	return m
}

func TestReportByComputeJobAndTag(t *testing.T) {
	const price = 0.293
	r := Make(ledger(), ByCompute, "")
	if len(r.Rows) != 1 || !near(r.Total.NodeHours, 3) || !near(r.Total.BusyNodeHours, 80.0/60) || !near(r.Total.IdleNodeHours, 100.0/60) ||
		!near(r.Total.Cost, 3*price) || r.Currency != "USD" {
		t.Fatalf("by compute = %+v, want 3 node-hours (80 min busy, 100 idle) at $%.3f", r, price)
	}
	if Cents(r.Total.Cost) != 0.88 {
		t.Errorf("total in cents = %v, want 0.88", Cents(r.Total.Cost))
	}

	jobs := rowsByKey(Make(ledger(), ByJob, ""))
	for key, hours := range map[string]float64{"a": 0.5, "b": 0.5, "c": 20.0 / 60, IdleRow: 100.0 / 60} {
		if got := jobs[key]; !near(got.NodeHours, hours) || !near(got.Cost, hours*price) || got.Compute != "cpu" {
			t.Errorf("job %s = %+v, want %.4f node-hours on cpu", key, got, hours)
		}
	}

	project := rowsByKey(Make(ledger(), ByTag, "project"))
	if !near(project["x"].NodeHours, 0.5) || !near(project[UntaggedRow].NodeHours, 2.5) {
		t.Errorf("by tag project = %+v, want x 0.5 h (job a) and the rest untagged", project)
	}
	team := rowsByKey(Make(ledger(), ByTag, "team"))
	if !near(team["nlp"].NodeHours, 20.0/60) || !near(team["vision"].NodeHours, 3-20.0/60) {
		t.Errorf("by tag team = %+v, want job c's tag (nlp) over its compute's (vision)", team)
	}
	ws := rowsByKey(Make(ledger(), ByWorkspace, ""))
	if !near(ws["ws"].Cost, 3*price) {
		t.Errorf("by workspace = %+v", ws)
	}
}

// A period clips every life and run: 10:30–11:00 bills n1 and n2 half an
// hour each, of which job a's last 10 minutes and job c's 20 node-minutes.
func TestReportClipsToThePeriod(t *testing.T) {
	in := ledger()
	in.Since, in.Until = at(30), at(60)
	r := Make(in, ByJob, "")
	if !near(r.Total.NodeHours, 1) || !near(r.Total.BusyNodeHours, 0.5) {
		t.Fatalf("10:30–11:00: %+v, want 1 node-hour, half busy", r.Total)
	}
	jobs := rowsByKey(r)
	if !near(jobs["a"].NodeHours, 10.0/60) || !near(jobs["c"].NodeHours, 20.0/60) || jobs["b"].NodeHours != 0 {
		t.Errorf("jobs = %+v", jobs)
	}
}

// A price file sets the currency and its sizes' prices; in a currency
// other than USD, sizes it does not list are unpriced and said so.
func TestPriceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	os.WriteFile(path, []byte("currency: eur\nsizes:\n  standard_nc6s_v3: {dedicated: 2.5, low_priority: 0.5}\n"), 0o600)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Hourly("Standard_NC6s_v3", "LowPriority"); !ok || v != 0.5 || p.Currency != "EUR" {
		t.Errorf("NC6s_v3 low priority = %v %v in %s, want 0.5 EUR", v, ok, p.Currency)
	}
	in := ledger()
	in.Prices = p
	r := Make(in, ByCompute, "")
	if r.Total.Cost != 0 || len(r.Unpriced) != 1 || r.Unpriced[0] != "Standard_DS3_v2" || !near(r.Total.NodeHours, 3) {
		t.Errorf("report in EUR without a DS3_v2 price = %+v, want its hours at no cost and the size named", r)
	}
	if v, ok := Catalog().Hourly("Standard_NC6s_v3", "Dedicated"); !ok || v != 3.06 {
		t.Errorf("catalogue NC6s_v3 = %v %v", v, ok)
	}
	for _, bad := range []string{"currency: euros\n", "sizes:\n  x: {dedicated: -1}\n", "colour: red\n"} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := Load(path); err == nil {
			t.Errorf("price file %q accepted", bad)
		}
	}
	if _, _, err := ParseBy("tag:"); err == nil {
		t.Error("by tag: without a key accepted")
	}
	if k, tag, err := ParseBy("tag:Team"); err != nil || k != ByTag || tag != "Team" {
		t.Errorf("ParseBy(tag:Team) = %s %s %v", k, tag, err)
	}
}

// A job's node time counts every attempt on all its nodes until its end
// (or now); a cap leaves the time until its cost reaches the limit.
func TestJobNodeHoursAndCapLeft(t *testing.T) {
	p := api.JobProperties{Status: api.JobRunning, Attempts: []api.Attempt{
		{Number: 1, Nodes: []string{"a", "b"}, Assigned: ptr(at(0)), Ended: ptr(at(30))},
		{Number: 2, Nodes: []string{"c", "d"}, Assigned: ptr(at(40))},
	}}
	if h := JobNodeHours(p, at(70)); !near(h, 2) { // 2×30 min + 2×30 min
		t.Fatalf("node-hours = %v, want 2", h)
	}
	// $3/h, cap $9: 3 node-hours allowed, 2 spent, 2 nodes: 30 minutes left.
	if left, ok := CapLeft(9, 3, 2, 2); !ok || left != 30*time.Minute {
		t.Errorf("left = %v %v, want 30m", left, ok)
	}
	if left, ok := CapLeft(5, 3, 2, 2); !ok || left != 0 {
		t.Errorf("over the cap: %v %v, want 0 and enforced", left, ok)
	}
	if _, ok := CapLeft(5, 0, 0, 1); ok {
		t.Error("a cap without a price is enforced")
	}
	p.Status, p.EndTime = api.JobFailed, ptr(at(50))
	if h := JobNodeHours(p, at(70)); !near(h, 1+10.0/60*2) {
		t.Errorf("after the job ended at 10:50: %v node-hours", h)
	}
}

func ptr[T any](v T) *T { return &v }

// A period starts on the first of the month or on Monday, UTC; thresholds
// are reached once per period, and the action applies from 100 %.
func TestBudgetPeriodsAndThresholds(t *testing.T) {
	sunday := time.Date(2026, 5, 10, 23, 0, 0, 0, time.UTC)
	if got := PeriodStart(api.BudgetWeek, sunday); !got.Equal(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("week of Sunday 10 May starts %v, want Monday 4 May", got)
	}
	if got := PeriodStart(api.BudgetMonth, sunday); !got.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("month starts %v", got)
	}
	b := api.BudgetProperties{Amount: 10, Period: api.BudgetMonth, Thresholds: []float64{50, 80, 100}, Action: api.BudgetStopScaleUp}
	st, reached := Evaluate(b, 8.5, "USD", sunday)
	if len(reached) != 2 || st.ActionActive || st.Percent != 85 {
		t.Fatalf("at 85 %%: %+v reached %v", st, reached)
	}
	b.Status = &st
	st, reached = Evaluate(b, 10, "USD", sunday)
	if len(reached) != 1 || reached[0] != 100 || !st.ActionActive || len(st.Reached) != 3 {
		t.Fatalf("at 100 %%: %+v reached %v", st, reached)
	}
	b.Status = &st
	st, reached = Evaluate(b, 1, "USD", sunday.AddDate(0, 1, 0)) // June
	if len(reached) != 0 || st.ActionActive || len(st.Reached) != 0 {
		t.Errorf("a new month: %+v reached %v, want a fresh start", st, reached)
	}
	b.Action = api.BudgetAlert
	if st, _ := Evaluate(b, 20, "USD", sunday); st.ActionActive {
		t.Error("an Alert budget acts")
	}
	if !Covers(api.BudgetProperties{Tag: &api.BudgetTag{Key: "team", Value: "a"}}, "cpu", map[string]string{"team": "a"}) ||
		Covers(api.BudgetProperties{Compute: "gpu"}, "cpu", nil) || !Covers(api.BudgetProperties{}, "cpu", nil) {
		t.Error("Covers")
	}
}
