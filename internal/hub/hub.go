// Package hub tracks live agents in memory: when each was last heard from,
// and a wake-up channel per node so a long poll answers at once when there
// is work for it.
package hub

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Hub is safe for concurrent use.
type Hub struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	wakes  map[string]chan struct{}
	closed chan struct{}
	once   sync.Once

	// With replicas (see Share): relay passes every wake-up on to the
	// other replicas, and fresh collects what was heard since the last
	// DrainSeen, for the store.
	relay func(node string)
	fresh map[string]time.Time
}

// New returns an empty hub.
func New() *Hub {
	return &Hub{seen: map[string]time.Time{}, wakes: map[string]chan struct{}{}, closed: make(chan struct{})}
}

// Close releases every waiting poll, now and later: the server is
// shutting down and should not hold connections open.
func (h *Hub) Close() { h.once.Do(func() { close(h.closed) }) }

// Share makes the hub one of several replicas': each Wake is also passed
// to relay (which tells the other replicas, whose WakeLocal answers the
// poll they hold), and what the hub hears is kept for DrainSeen. Call it
// before the hub is used.
func (h *Hub) Share(relay func(node string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.relay = relay
	h.fresh = map[string]time.Time{}
}

// Seen records that a node was heard from at t.
func (h *Hub) Seen(node string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.After(h.seen[node]) {
		h.seen[node] = t
		if h.fresh != nil {
			h.fresh[node] = t
		}
	}
}

// DrainSeen returns what was heard since the last call (node → latest
// time), for a shared hub; nil otherwise.
func (h *Hub) DrainSeen() map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.fresh) == 0 {
		return nil
	}
	out := h.fresh
	h.fresh = map[string]time.Time{}
	return out
}

// Heard records heartbeats another replica heard (not kept for
// DrainSeen: they are in the store already).
func (h *Hub) Heard(seen map[string]time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for node, t := range seen {
		if t.After(h.seen[node]) {
			h.seen[node] = t
		}
	}
}

// LastSeen is when the node was last heard from by this process.
func (h *Hub) LastSeen(node string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.seen[node]
	return t, ok
}

// Forget drops a node.
func (h *Hub) Forget(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, node)
	if ch, ok := h.wakes[node]; ok {
		close(ch)
		delete(h.wakes, node)
	}
}

func (h *Hub) wakeChan(node string) chan struct{} {
	ch, ok := h.wakes[node]
	if !ok {
		ch = make(chan struct{}, 1)
		h.wakes[node] = ch
	}
	return ch
}

// Wake tells a waiting poll of the node to look again, on whichever
// replica holds it.
func (h *Hub) Wake(node string) {
	h.WakeLocal(node)
	h.mu.Lock()
	relay := h.relay
	h.mu.Unlock()
	if relay != nil {
		relay(node)
	}
}

// wakeBurst is how many nodes' polls WakeAll wakes before it yields.
const wakeBurst = 32

// WakeAll wakes the polls of nodes a few at a time, each few let run
// before the next: thousands woken at once (a pass that places thousands
// of jobs) overflow the Go scheduler's run queues into its global one, and
// a goroutine preempted behind them (the store's writer, holding SQLite's
// one writer and every report queued for it) waited there up to hundreds
// of milliseconds.
func (h *Hub) WakeAll(nodes []string) {
	for i, id := range nodes {
		if i > 0 && i%wakeBurst == 0 {
			runtime.Gosched()
		}
		h.Wake(id)
	}
}

// WakeLocal wakes a poll of the node this process holds.
func (h *Hub) WakeLocal(node string) {
	h.mu.Lock()
	ch := h.wakeChan(node)
	h.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Wait blocks until the node is woken, ctx ends, or timeout passes. It
// returns true when woken.
func (h *Hub) Wait(ctx context.Context, node string, timeout time.Duration) bool {
	h.mu.Lock()
	ch := h.wakeChan(node)
	h.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case _, ok := <-ch:
		return ok
	case <-ctx.Done():
	case <-h.closed:
	case <-t.C:
	}
	return false
}
