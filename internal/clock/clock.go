// Package clock lets time-dependent code take its clock as a value, so
// tests step a fake clock instead of sleeping.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is what controllers need from time.
type Clock interface {
	Now() time.Time
	// After fires once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns the wall time.
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock that moves only when told to.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	added   chan struct{} // closed when After adds a waiter; for BlockUntil
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After fires when the fake time reaches now+d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{f.now.Add(d), ch})
	if f.added != nil {
		close(f.added)
		f.added = nil
	}
	return ch
}

// BlockUntil returns once at least n After calls wait on the clock (not
// yet fired), or with ctx's error. A test calls it before Step, so the
// step finds the timer of the code under test instead of racing it: the
// code under test has reached its wait when BlockUntil returns.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.added == nil {
			f.added = make(chan struct{})
		}
		added := f.added
		f.mu.Unlock()
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Step moves the fake time forward by d and fires due timers.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// Set moves the fake time to t (never backwards).
func (f *Fake) Set(t time.Time) {
	if d := t.Sub(f.Now()); d > 0 {
		f.Step(d)
	}
}
