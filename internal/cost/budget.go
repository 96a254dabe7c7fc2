package cost

import (
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// PeriodStart is when a budget's current period began: the first of the
// month or the Monday of the week, at midnight UTC.
func PeriodStart(period string, now time.Time) time.Time {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if period == api.BudgetWeek {
		back := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -back)
	}
	return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Covers says whether a budget counts a compute (by name and tags) of its
// workspace.
func Covers(b api.BudgetProperties, compute string, tags map[string]string) bool {
	switch {
	case b.Compute != "":
		return strings.EqualFold(b.Compute, compute)
	case b.Tag != nil:
		v, ok := tags[b.Tag.Key]
		return ok && v == b.Tag.Value
	}
	return true
}

// Evaluate is a budget's status after spending spent by now, given its
// last status: the period starts afresh when a new one began, and reached
// lists the thresholds crossed since the last status.
func Evaluate(b api.BudgetProperties, spent float64, currency string, now time.Time) (st api.BudgetStatus, reached []float64) {
	start := PeriodStart(b.Period, now)
	st = api.BudgetStatus{PeriodStart: start, Spent: spent, Currency: currency, Updated: now.UTC()}
	if b.Amount > 0 {
		st.Percent = 100 * spent / b.Amount
	}
	var before []float64
	if old := b.Status; old != nil && old.PeriodStart.Equal(start) {
		before = old.Reached
	}
	st.Reached = slices.Clone(before)
	for _, t := range b.Thresholds {
		if st.Percent >= t && !slices.Contains(before, t) {
			reached = append(reached, t)
			st.Reached = append(st.Reached, t)
		}
	}
	slices.Sort(st.Reached)
	st.ActionActive = b.Action != api.BudgetAlert && st.Percent >= 100
	return st, reached
}
