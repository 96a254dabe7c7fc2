// Package replica lets several control plane processes share one
// PostgreSQL store: it elects the one that runs the controllers (a lease
// in the store, renewed while it lives, with a fencing token on every
// controller write), passes agents' wake-ups and "something changed"
// signals between replicas (the store's Notify and Listen), and writes the
// heartbeats each replica hears to the store so the leader sees agents
// that poll other replicas.
package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// compactEvery is how often the leader folds the store's count rows and
// forgets old heartbeats.
const compactEvery = 10 * time.Second

// LeaseName is the lease of the replica that runs the controllers.
const LeaseName = "controllers"

// DefaultLease is how long a leader's lease runs without renewal: the
// longest a dead leader's controllers stay without a successor.
const DefaultLease = 15 * time.Second

// Channels between replicas.
const (
	wakeChannel    = "cumulus_wake"    // payload: node ids, comma-separated
	changedChannel = "cumulus_changed" // payload: what changed (Clusters, Operations)
)

// What changed, in a "changed" signal.
const (
	Clusters   = "clusters"
	Operations = "operations"
)

// Options configure a replica.
type Options struct {
	DB    *store.DB // the shared store (unfenced)
	DSN   string    // its URL, for the LISTEN connection ("" = no signals: tests with SQLite)
	Hub   *hub.Hub
	Clock clock.Clock
	Log   *slog.Logger
	// Holder names this replica in the lease ("" = host name and a
	// random suffix).
	Holder string
	Lease  time.Duration // 0 = DefaultLease
	// HeartbeatTimeout is the controllers' heartbeat timeout: heartbeats
	// are written to the store several times within it.
	HeartbeatTimeout time.Duration
	// Lead runs the controllers for one term with the fenced store and
	// returns when ctx ends (the term is over).
	Lead func(ctx context.Context, db *store.DB)
	// OnChanged is told of a change another replica signalled (Clusters,
	// Operations), to wake the local controllers.
	OnChanged func(what string)
}

// Replica is one control plane process among several.
type Replica struct {
	o      Options
	sends  chan signal
	mu     sync.Mutex
	leader bool
}

type signal struct{ channel, payload string }

// New makes a replica; Run starts it. The hub is shared from now on.
func New(o Options) *Replica {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Holder == "" {
		o.Holder = NewHolder()
	}
	r := &Replica{o: o, sends: make(chan signal, 4096)}
	if o.DSN != "" {
		o.Hub.Share(func(node string) { r.send(wakeChannel, node) })
	} else {
		o.Hub.Share(nil)
	}
	return r
}

// NewHolder names this process: host name, process id and a random part.
func NewHolder() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Holder is the name this replica holds the lease under.
func (r *Replica) Holder() string { return r.o.Holder }

// Leader reports whether this replica runs the controllers now.
func (r *Replica) Leader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// Changed tells the other replicas that something changed (Clusters,
// Operations): the leader's controllers look again at once.
func (r *Replica) Changed(what string) {
	if r.o.DSN != "" {
		r.send(changedChannel, what)
	}
}

func (r *Replica) send(channel, payload string) {
	select {
	case r.sends <- signal{channel, payload}:
	default: // full: the periodic passes and poll timeouts catch up
	}
}

// Run runs the replica until ctx ends: the election, the signals and the
// heartbeats. On return it has stopped leading and given up its lease.
func (r *Replica) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if r.o.DSN != "" {
		wg.Add(2)
		go func() { defer wg.Done(); r.listen(ctx) }()
		go func() { defer wg.Done(); r.notify(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.heartbeats(ctx) }()
	r.elect(ctx)
	wg.Wait()
}

// elect takes or renews the lease every third of it; while it holds the
// lease it runs Lead. It stops leading before its lease could have run
// out unrenewed, so that two replicas never lead at once by the clock;
// the fencing token guards the writes of one that was paused meanwhile.
func (r *Replica) elect(ctx context.Context) {
	every := r.o.Lease / 3
	var stop context.CancelFunc
	var done chan struct{}
	var token int64
	var renewed time.Time
	end := func(why string) {
		if stop == nil {
			return
		}
		stop()
		<-done
		stop, done = nil, nil
		r.mu.Lock()
		r.leader = false
		r.mu.Unlock()
		r.o.Log.Warn("stopped running the controllers", "holder", r.o.Holder, "token", token, "why", why)
	}
	for {
		now := r.o.Clock.Now()
		l, ok, err := r.o.DB.AcquireLease(ctx, LeaseName, r.o.Holder, now, r.o.Lease)
		switch {
		case ctx.Err() != nil:
			end("shutting down")
			if token > 0 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := r.o.DB.ReleaseLease(rctx, LeaseName, r.o.Holder, token); err != nil {
					r.o.Log.Warn("release the controllers' lease", "err", err)
				}
				cancel()
			}
			return
		case err != nil:
			r.o.Log.Warn("renew the controllers' lease", "err", err)
			if stop != nil && !now.Before(renewed.Add(r.o.Lease-every)) {
				end("the lease could not be renewed in time")
			}
		case !ok:
			end("another replica holds the lease")
		case stop == nil || l.Token != token:
			end("the lease changed hands")
			token, renewed = l.Token, now
			tctx, cancel := context.WithCancel(ctx)
			stop, done = cancel, make(chan struct{})
			r.mu.Lock()
			r.leader = true
			r.mu.Unlock()
			r.o.Log.Info("running the controllers", "holder", r.o.Holder, "token", token)
			fenced := r.o.DB.Fenced(store.Fence{Lease: LeaseName, Holder: r.o.Holder, Token: token})
			go func() {
				defer close(done)
				r.o.Lead(tctx, fenced)
			}()
		default:
			renewed = now
		}
		select {
		case <-ctx.Done():
		case <-r.o.Clock.After(every):
		}
	}
}

// heartbeats writes what this replica heard to the store several times a
// heartbeat timeout, and, while leading, reads what the others heard.
func (r *Replica) heartbeats(ctx context.Context) {
	every := r.o.HeartbeatTimeout / 6
	if every <= 0 || every > 5*time.Second {
		every = 5 * time.Second
	}
	var compacted time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.o.Clock.After(every):
		}
		if seen := r.o.Hub.DrainSeen(); len(seen) > 0 {
			if err := r.o.DB.PutHeartbeats(ctx, seen); err != nil && ctx.Err() == nil {
				// Lost for this round; the agents' next polls are heard again.
				r.o.Log.Warn("record heartbeats", "err", err)
			}
		}
		if !r.Leader() {
			continue
		}
		now := r.o.Clock.Now()
		seen, err := r.o.DB.HeartbeatsSince(ctx, now.Add(-2*r.o.HeartbeatTimeout))
		if err != nil {
			if ctx.Err() == nil {
				r.o.Log.Warn("read heartbeats", "err", err)
			}
			continue
		}
		r.o.Hub.Heard(seen)
		if now.Sub(compacted) >= compactEvery {
			compacted = now
			if err := r.o.DB.DeleteHeartbeatsBefore(ctx, now.Add(-24*time.Hour)); err != nil {
				r.o.Log.Warn("forget old heartbeats", "err", err)
			}
			if err := r.o.DB.CompactCounts(ctx); err != nil {
				r.o.Log.Warn("compact counts", "err", err)
			}
		}
	}
}

// notify sends the queued signals, wake-ups batched into one payload.
func (r *Replica) notify(ctx context.Context) {
	for {
		var first signal
		select {
		case <-ctx.Done():
			return
		case first = <-r.sends:
		}
		batch := map[signal]bool{first: true}
		for more := true; more && len(batch) < 256; {
			select {
			case s := <-r.sends:
				batch[s] = true
			default:
				more = false
			}
		}
		var nodes []string
		for s := range batch {
			if s.channel == wakeChannel {
				nodes = append(nodes, s.payload)
				continue
			}
			r.pgNotify(ctx, s.channel, s.payload)
		}
		for len(nodes) > 0 { // a payload stays well under PostgreSQL's 8000 bytes
			n := min(len(nodes), 64)
			r.pgNotify(ctx, wakeChannel, strings.Join(nodes[:n], ","))
			nodes = nodes[n:]
		}
	}
}

func (r *Replica) pgNotify(ctx context.Context, channel, payload string) {
	if err := r.o.DB.Notify(ctx, channel, payload); err != nil && ctx.Err() == nil {
		r.o.Log.Warn("signal the other replicas", "channel", channel, "err", err)
	}
}

// listen hears the other replicas' signals on a connection of its own,
// connecting again when it breaks.
func (r *Replica) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.o.Log.Warn("listen for the other replicas' signals; connecting again", "err", err)
		// The signals missed meanwhile: the controllers' periodic passes
		// and the polls' timeouts catch up.
		if r.o.OnChanged != nil {
			r.o.OnChanged(Clusters)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (r *Replica) listenOnce(ctx context.Context) error {
	return store.Listen(ctx, r.o.DSN, []string{wakeChannel, changedChannel}, func(channel, payload string) {
		switch channel {
		case wakeChannel:
			for _, node := range strings.Split(payload, ",") {
				r.o.Hub.WakeLocal(node)
			}
		case changedChannel:
			if r.o.OnChanged != nil {
				r.o.OnChanged(payload)
			}
		}
	})
}
