package api

import (
	"net/url"
	"strings"
	"time"
)

// TypeBudget is a budget's ARM type (a Cumulus extension).
const TypeBudget = Provider + "/workspaces/budgets"

// Budget periods and actions.
const (
	BudgetMonth = "Month"
	BudgetWeek  = "Week"

	BudgetAlert       = "Alert"       // events, metrics and the webhook only
	BudgetStopScaleUp = "StopScaleUp" // no new nodes: jobs queue, running jobs finish
	BudgetScaleToMin  = "ScaleToMin"  // no new nodes, and idle nodes above the minimum go at once
)

// DefaultBudgetThresholds are the percentages of the amount at which a
// budget alerts when none are given.
var DefaultBudgetThresholds = []float64{50, 80, 100}

// Budget is an amount a workspace, a compute or the computes with a tag
// may spend per period, with alerts and an action at 100 %.
type Budget struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	SystemData *SystemData      `json:"systemData,omitempty"`
	Properties BudgetProperties `json:"properties"`
}

// BudgetProperties are a budget's settings and (read-only) status.
type BudgetProperties struct {
	Amount float64 `json:"amount"`
	Period string  `json:"period"` // Month (calendar, UTC) or Week (from Monday, UTC)
	// Scope: one compute of the workspace, or every compute of the
	// workspace with a tag; neither: the whole workspace.
	Compute    string     `json:"compute,omitempty"`
	Tag        *BudgetTag `json:"tag,omitempty"`
	Thresholds []float64  `json:"thresholds,omitempty"` // percentages of the amount
	Action     string     `json:"action,omitempty"`
	// Webhook is POSTed a JSON notice at each threshold reached.
	Webhook string        `json:"webhook,omitempty"`
	Status  *BudgetStatus `json:"status,omitempty"`
}

// BudgetTag is a tag a compute must have.
type BudgetTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// BudgetStatus is what a budget has seen in its current period.
type BudgetStatus struct {
	PeriodStart time.Time `json:"periodStart"`
	Spent       float64   `json:"spent"`
	Currency    string    `json:"currency"`
	Percent     float64   `json:"percent"`
	Reached     []float64 `json:"reached,omitempty"` // thresholds reached this period
	// ActionActive: the amount is spent and the action applies.
	ActionActive bool      `json:"actionActive,omitempty"`
	Updated      time.Time `json:"updated"`
}

// PrepareBudget validates a budget and fills its defaults; the status a
// client sends is dropped.
func PrepareBudget(b *Budget, name string) error {
	var v Validation
	if err := CheckJobName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	p := &b.Properties
	p.Status = nil
	if p.Amount <= 0 {
		v.Add(CodeValidationError, "properties.amount", "amount must be positive, got %v", p.Amount)
	}
	switch {
	case strings.EqualFold(p.Period, BudgetMonth) || p.Period == "":
		p.Period = BudgetMonth
	case strings.EqualFold(p.Period, BudgetWeek):
		p.Period = BudgetWeek
	default:
		v.Add(CodeValidationError, "properties.period", "period must be Month or Week, got %q", p.Period)
	}
	if p.Compute != "" && p.Tag != nil {
		v.Add(CodeValidationError, "properties.tag", "a budget covers a compute or a tag, not both")
	}
	if p.Tag != nil && p.Tag.Key == "" {
		v.Add(CodeValidationError, "properties.tag.key", "tag.key is required")
	}
	if len(p.Thresholds) == 0 {
		p.Thresholds = append([]float64(nil), DefaultBudgetThresholds...)
	}
	for _, t := range p.Thresholds {
		if t <= 0 || t > 1000 {
			v.Add(CodeValidationError, "properties.thresholds", "thresholds are percentages of the amount between 0 and 1000, got %v", t)
		}
	}
	switch {
	case p.Action == "" || strings.EqualFold(p.Action, BudgetAlert):
		p.Action = BudgetAlert
	case strings.EqualFold(p.Action, BudgetStopScaleUp) || strings.EqualFold(p.Action, "stop-scale-up"):
		p.Action = BudgetStopScaleUp
	case strings.EqualFold(p.Action, BudgetScaleToMin) || strings.EqualFold(p.Action, "scale-to-min"):
		p.Action = BudgetScaleToMin
	default:
		v.Add(CodeValidationError, "properties.action", "action must be Alert, StopScaleUp or ScaleToMin, got %q", p.Action)
	}
	if p.Webhook != "" {
		u, err := url.Parse(p.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.Add(CodeValidationError, "properties.webhook", "webhook must be an http or https URL, got %q", p.Webhook)
		}
	}
	return v.Err()
}
