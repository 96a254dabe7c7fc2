package controller

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/webhook"
)

// A StopScaleUp budget of 1.00 on a Standard_DS3_v2 cluster ($0.293/h):
// after a node has lived four hours the budget is spent (117 %); its 50,
// 80 and 100 % thresholds are in the cluster's history and reach the
// webhook once each; the next job queues with the budget named as its
// reason and no node is made for it; a new month lifts the hold and the
// job runs.
func TestBudgetStopsScaleUpAndAlerts(t *testing.T) {
	h := newHarness(t)
	c := h.compute("cpu", 0, 2, "PT10H")
	var mu sync.Mutex
	var notices []BudgetNotice
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n BudgetNotice
		json.NewDecoder(r.Body).Decode(&n)
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	}))
	defer hook.Close()
	b := api.Budget{ID: h.sc.WorkspaceID() + "/budgets/team", Name: "team", Properties: api.BudgetProperties{
		Amount: 1, Compute: "cpu", Action: "stop-scale-up", Webhook: hook.URL}}
	if err := api.PrepareBudget(&b, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(h.ctx, h.db.W(), store.KindBudget, h.sc.WorkspaceID(), "team", b, 0, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	judge := &Budgets{DB: h.db, Clock: h.clk, Prices: cost.Catalog(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Webhooks: webhook.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}

	first := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	h.finish(first, 0)
	h.clk.Step(4 * time.Hour) // the idle node still costs
	h.heartbeat(c)
	if err := judge.Judge(h.ctx); err != nil {
		t.Fatal(err)
	}
	d, err := store.Get[api.Budget](h.ctx, h.db.Q(), store.KindBudget, h.sc.WorkspaceID(), "team")
	if err != nil {
		t.Fatal(err)
	}
	st := d.Value.Properties.Status
	if st == nil || !st.ActionActive || st.Percent < 100 || len(st.Reached) != 3 || st.Currency != "USD" {
		t.Fatalf("status after 4 node-hours = %+v, want 117 %% with every threshold reached and the action active", st)
	}
	if err := judge.Judge(h.ctx); err != nil { // again: nothing new to say
		t.Fatal(err)
	}
	mu.Lock()
	if len(notices) != 3 || notices[2].Threshold != 100 || notices[2].Budget != "team" || notices[2].Action != api.BudgetStopScaleUp {
		t.Errorf("webhook notices = %+v, want 50, 80 and 100 once each", notices)
	}
	mu.Unlock()
	types, evs := h.history(c)
	n := 0
	for i, typ := range types {
		if typ == api.EventBudgetThreshold {
			n++
			if !strings.Contains(evs[i].Message, "budget team reached") {
				t.Errorf("threshold event says %q", evs[i].Message)
			}
		}
	}
	if n != 3 {
		t.Errorf("history %v: %d budget events, want 3", types, n)
	}

	// The idle node is busy with a second job; the third waits for the budget.
	h.submit(c, 1)
	third := h.submit(c, 1)
	h.pass()
	j := h.job(third)
	if msg := h.reason(j); j.Doc.Properties.Status != api.JobQueued || !strings.HasPrefix(msg, api.BudgetWaitPrefix+"budget team reached") {
		t.Fatalf("third job %s: %q, want Queued waiting for budget team", j.Doc.Properties.Status, msg)
	}
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("nodes = %d, want still 1: no node for the job while the budget is spent", got)
	}
	if errs := h.storedCompute(c).Aml().Errors; len(errs) == 0 || !strings.Contains(errs[0].Error.Message, "budget team") {
		t.Errorf("compute errors %+v, want the budget named", errs)
	}

	// A new month: the budget starts afresh and the job gets its node.
	now := h.clk.Now()
	h.clk.Step(time.Date(now.Year(), now.Month()+1, 1, 0, 1, 0, 0, time.UTC).Sub(now))
	h.heartbeat(c)
	if err := judge.Judge(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.pass()
	if got := len(h.nodes(c)); got != 2 {
		t.Fatalf("nodes in the new month = %d, want 2", got)
	}
	if msg := h.message(third); strings.HasPrefix(msg, api.BudgetWaitPrefix) {
		t.Errorf("the job still says %q", msg)
	}
}

// A budget created or changed is judged within seconds of Notify, not at
// the next minute; one already judged and unchanged is left to the minute.
func TestBudgetJudgedSoonAfterAChange(t *testing.T) {
	h := newHarness(t)
	h.compute("cpu", 0, 2, "PT10H")
	judge := &Budgets{DB: h.db, Clock: h.clk, Prices: cost.Catalog(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { judge.Run(ctx); close(done) }()
	// wait returns when n timers wait on the fake clock (a timer of a
	// select left by the other case stays registered, unfired).
	wait := func(n int) {
		t.Helper()
		bctx, bcancel := context.WithTimeout(h.ctx, 10*time.Second)
		defer bcancel()
		if err := h.clk.BlockUntil(bctx, n); err != nil {
			t.Fatal("the judge is not waiting on the clock:", err)
		}
	}
	wait(1) // the first round judged nothing (no budgets) and sleeps a minute
	b := api.Budget{ID: h.sc.WorkspaceID() + "/budgets/team", Name: "team", Properties: api.BudgetProperties{Amount: 5}}
	if err := api.PrepareBudget(&b, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(h.ctx, h.db.W(), store.KindBudget, h.sc.WorkspaceID(), "team", b, 0, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	judge.Notify()
	wait(2) // woken: waits out the gap (the minute's timer still registered)
	h.clk.Step(budgetWakeGap)
	wait(2) // judged, and waiting again
	d, err := store.Get[api.Budget](h.ctx, h.db.Q(), store.KindBudget, h.sc.WorkspaceID(), "team")
	if err != nil || d.Value.Properties.Status == nil {
		t.Fatalf("budget after Notify and %s: %+v %v, want judged", budgetWakeGap, d.Value.Properties.Status, err)
	}
	cancel()
	<-done
}
