package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/webhook"
)

// BudgetInterval is how often budgets are judged.
const BudgetInterval = time.Minute

// Budgets judges every budget against what its scope spent this period:
// it keeps each budget's status, records the thresholds reached in the
// history of the computes it covers, calls its webhook, and (through the
// status the cluster controller reads) stops scale-up at 100 %.
type Budgets struct {
	DB     *store.DB
	Clock  clock.Clock
	Prices cost.Prices
	Log    *slog.Logger
	// Webhooks is where budget webhooks may go (see package webhook).
	Webhooks webhook.Policy
	// Changed is told when an action starts or ends, to wake the clusters.
	Changed func()

	wake       wakeup
	clientOnce sync.Once
	client     *http.Client
}

// budgetWakeGap is the least time between two judgements asked for by
// Notify (a burst of changes makes one).
const budgetWakeGap = 2 * time.Second

// Notify asks for a judgement soon of the budgets created or changed
// since they were last judged (the others wait for the next interval, so
// a busy server's changes cost a list of budgets, not a ledger read).
func (b *Budgets) Notify() { b.wake.notify() }

// Run judges the budgets every BudgetInterval, and soon after Notify,
// until ctx ends.
func (b *Budgets) Run(ctx context.Context) {
	all := true
	next := b.Clock.Now().Add(BudgetInterval)
	for {
		if err := b.judge(ctx, all); err != nil && ctx.Err() == nil {
			b.Log.Error("judge budgets", "err", err)
		}
		if all {
			next = b.Clock.Now().Add(BudgetInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-b.Clock.After(next.Sub(b.Clock.Now())):
			all = true
		case <-b.wake.c():
			all = false
			select { // at most one judgement per gap
			case <-ctx.Done():
				return
			case <-b.Clock.After(budgetWakeGap):
			}
		}
	}
}

// BudgetNotice is what a budget's webhook is sent when it reaches a
// threshold.
type BudgetNotice struct {
	Budget      string    `json:"budget"`
	Workspace   string    `json:"workspace"`
	Threshold   float64   `json:"threshold"` // percent
	Spent       float64   `json:"spent"`
	Amount      float64   `json:"amount"`
	Currency    string    `json:"currency"`
	PeriodStart time.Time `json:"periodStart"`
	Action      string    `json:"action"`
	Time        time.Time `json:"time"`
}

// Judge judges every budget once.
func (b *Budgets) Judge(ctx context.Context) error { return b.judge(ctx, true) }

// judge judges every budget, or (all false) those changed since their
// last judgement.
func (b *Budgets) judge(ctx context.Context, all bool) error {
	docs, err := store.List[api.Budget](ctx, b.DB.Q(), store.KindBudget, "/", false, "", 10000)
	if err != nil {
		return err
	}
	var errs []error
	ledgers := map[string]cost.Input{} // by workspace and period start: read once for its budgets
	for _, d := range docs {
		if !all && !changedSinceJudged(d.Value) {
			continue
		}
		if err := b.judgeOne(ctx, d, ledgers); err != nil {
			errs = append(errs, fmt.Errorf("budget %s: %w", d.Value.Name, err))
		}
	}
	return errors.Join(errs...)
}

// changedSinceJudged: never judged, or changed by someone since.
func changedSinceJudged(bud api.Budget) bool {
	st, sd := bud.Properties.Status, bud.SystemData
	return st == nil || (sd != nil && sd.LastModifiedAt != nil && sd.LastModifiedAt.After(st.Updated))
}

func (b *Budgets) judgeOne(ctx context.Context, d store.Doc[api.Budget], ledgers map[string]cost.Input) error {
	now := b.Clock.Now().UTC()
	bud := d.Value
	wsID, _, _ := strings.Cut(bud.ID, "/budgets/")
	start := cost.PeriodStart(bud.Properties.Period, now)
	key := store.Key(wsID) + "@" + start.Format(time.RFC3339)
	var err error
	in, ok := ledgers[key]
	if !ok {
		if in, err = cost.ReadInput(ctx, b.DB.Q(), store.Key(wsID)+"/computes/", start, now, b.Prices, false); err != nil {
			return err
		}
		ledgers[key] = in
	}
	covered := map[string]bool{}
	var nodes []store.NodeBill
	for _, n := range in.Nodes {
		c := in.Computes[n.Compute]
		if cost.Covers(bud.Properties, c.Name, c.Tags) {
			nodes, covered[n.Compute] = append(nodes, n), true
		}
	}
	in.Nodes = nodes
	spent := cost.Make(in, cost.ByCompute, "").Total.Cost
	was := bud.Properties.Status
	st, reached := cost.Evaluate(bud.Properties, spent, b.Prices.Currency, now)
	bud.Properties.Status = &st
	_, err = store.Put(ctx, b.DB.W(), store.KindBudget, wsID, bud.Name, bud, d.Version, now)
	if errors.Is(err, store.ErrETagMismatch) || errors.Is(err, store.ErrNotFound) {
		return nil // changed or deleted meanwhile: judged again next time
	}
	if err != nil {
		return err
	}
	if (was != nil && was.ActionActive) != st.ActionActive && b.Changed != nil {
		b.Changed()
	}
	if len(reached) == 0 {
		return nil
	}
	computes, err := b.coveredComputes(ctx, wsID, bud.Properties, covered)
	if err != nil {
		return err
	}
	for _, t := range reached {
		msg := fmt.Sprintf("budget %s reached %.0f %% of %.2f %s this %s (spent %.2f)", bud.Name, t, bud.Properties.Amount,
			b.Prices.Currency, strings.ToLower(bud.Properties.Period), spent)
		if t >= 100 && bud.Properties.Action != api.BudgetAlert {
			msg += "; action " + bud.Properties.Action
		}
		for _, c := range computes {
			e := store.Event{Compute: c, Type: api.EventBudgetThreshold, Time: now}
			e.Message, e.Reason = msg, bud.Name
			if err := store.AddEvent(ctx, b.DB.W(), e); err != nil {
				return err
			}
		}
		b.Log.Warn("budget threshold reached", "budget", bud.Name, "threshold", t, "spent", spent, "amount", bud.Properties.Amount)
		if bud.Properties.Webhook != "" {
			b.notify(ctx, bud, BudgetNotice{Budget: bud.Name, Workspace: wsID[strings.LastIndex(wsID, "/")+1:], Threshold: t, Spent: spent,
				Amount: bud.Properties.Amount, Currency: b.Prices.Currency, PeriodStart: st.PeriodStart, Action: bud.Properties.Action, Time: now})
		}
	}
	return nil
}

// coveredComputes are the ids of the workspace's computes a budget covers
// (those with nodes this period, and the others it names or tags).
func (b *Budgets) coveredComputes(ctx context.Context, wsID string, p api.BudgetProperties, withNodes map[string]bool) ([]string, error) {
	docs, err := store.List[api.Compute](ctx, b.DB.Q(), store.KindCompute, wsID, true, "", 10000)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range docs {
		if withNodes[store.Key(d.Value.ID)] || cost.Covers(p, d.Value.Name, d.Value.Tags) {
			out = append(out, d.Value.ID)
		}
	}
	return out, nil
}

// notify posts a notice to the budget's webhook once, where the webhook
// policy lets it go; a failure is logged (the threshold stays reached: a
// notice is sent at most once).
func (b *Budgets) notify(ctx context.Context, bud api.Budget, n BudgetNotice) {
	body, _ := json.Marshal(n)
	b.clientOnce.Do(func() { b.client = b.Webhooks.Client() })
	if err := webhook.Post(ctx, b.client, bud.Properties.Webhook, body); err != nil {
		b.Log.Error("budget webhook", "budget", bud.Name, "err", err)
	}
}

// budgetHolds are the budgets of a compute's workspace whose action is in
// force on it.
func budgetHolds(ctx context.Context, q store.Querier, comp api.Compute) ([]api.BudgetHold, error) {
	wsID, _, _ := strings.Cut(comp.ID, "/computes/")
	docs, err := store.List[api.Budget](ctx, q, store.KindBudget, wsID, true, "", 10000)
	if err != nil {
		return nil, err
	}
	var out []api.BudgetHold
	for _, d := range docs {
		p := d.Value.Properties
		if p.Status == nil || !p.Status.ActionActive || !cost.Covers(p, comp.Name, comp.Tags) {
			continue
		}
		out = append(out, api.BudgetHold{Name: d.Value.Name, Percent: p.Status.Percent, Amount: p.Amount, Currency: p.Status.Currency,
			Period: p.Period, ToMin: p.Action == api.BudgetScaleToMin})
	}
	return out, nil
}
