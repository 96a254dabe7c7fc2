package decide

import (
	"math"
	"time"
)

// Usage is a fair-share group's usage of one cluster: the node time its
// jobs held, each second weighing less as it recedes, halving every
// half-life. Value is the decayed node-seconds as of At, and Held the
// nodes the group has held since At: with those, the usage at any later
// time is known without a record per second, so the controller writes a
// group's Usage only when what it holds changes (Advance).
//
// A node held for a constant h nodes forever adds up to h·τ node-seconds,
// with τ = half-life / ln 2 (the mean age of the weights): Recent divides
// by τ, so usage reads as the nodes a group held on average lately.
type Usage struct {
	Value float64 // node-seconds, decayed to At
	At    time.Time
	Held  int // nodes held from At on
}

// Now is the decayed node-seconds at now: Value decayed over now − At, plus
// Held nodes over that time, each instant decayed by its age. A time
// before At reads Value.
func (u Usage) Now(now time.Time, halfLife time.Duration) float64 {
	dt := now.Sub(u.At).Seconds()
	if dt <= 0 || halfLife <= 0 {
		return u.Value
	}
	tau := halfLife.Seconds() / math.Ln2
	keep := math.Exp(-dt / tau)
	return u.Value*keep + float64(u.Held)*tau*(1-keep)
}

// Advance is the usage at now with the group holding held nodes from now
// on. It is what the controller stores when a group's holding changes.
func (u Usage) Advance(now time.Time, halfLife time.Duration, held int) Usage {
	if u.At.IsZero() {
		return Usage{At: now, Held: held}
	}
	if now.Before(u.At) {
		now = u.At
	}
	return Usage{Value: u.Now(now, halfLife), At: now, Held: held}
}

// Recent is the usage at now as the nodes the group held on average
// lately: the decayed node-seconds over τ = half-life / ln 2.
func (u Usage) Recent(now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		return 0
	}
	return u.Now(now, halfLife) * math.Ln2 / halfLife.Seconds()
}
