// Package batch lets concurrent callers have their work written together
// (group commit): the callers that arrive while one batch is being written
// wait, and the next batch holds all of them. One caller at a time writes;
// every caller returns once the batch that holds its work was written.
package batch

import (
	"slices"
	"sync"
)

// Group batches items of type T; its zero value is ready to use. An item
// carries its own outcome (T is usually a pointer), which the write
// function fills in.
type Group[T any] struct {
	// Max bounds the items of one batch (every item of a batch waits for
	// the whole batch); 0: no bound.
	Max int

	mu    sync.Mutex
	queue []*waiter[T]
	busy  bool // a caller is writing a batch
}

type waiter[T any] struct {
	item T
	// ready is told true when the item was written, false when its caller
	// is to write the next batch.
	ready chan bool
}

// Do queues item and returns once a batch holding it was written by write,
// which the caller runs itself when it is its turn to write (with the
// items queued at that moment, item first). Do does not give up while it
// waits: the caller may be the one to write the next batch, which others
// wait for. When write panics, the writing is still handed on and the
// batch's other callers released (their items as write left them), and
// the panic goes on in the caller that wrote.
func (g *Group[T]) Do(item T, write func(batch []T)) {
	w := &waiter[T]{item: item, ready: make(chan bool, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		lead = !<-w.ready
	}
	if lead {
		g.lead(w, write)
	}
}

// Queued is how many items wait for a batch (not those being written).
func (g *Group[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// lead writes the items queued now (w's first), then hands the writing on
// to the first item queued meanwhile and releases the batch's callers.
func (g *Group[T]) lead(w *waiter[T], write func([]T)) {
	g.mu.Lock()
	n := len(g.queue)
	if g.Max > 0 {
		n = min(n, g.Max)
	}
	waiters := slices.Clone(g.queue[:n])
	g.queue = g.queue[n:]
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if len(g.queue) > 0 {
			g.queue[0].ready <- false // it writes the next batch
		} else {
			g.busy = false
		}
		g.mu.Unlock()
		for _, o := range waiters {
			if o != w {
				o.ready <- true
			}
		}
	}()
	items := make([]T, len(waiters))
	for i, o := range waiters {
		items[i] = o.item
	}
	write(items)
}
