package sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Provider is the simulated cloud: how long nodes take to come and to go,
// and when low-priority nodes are taken back. Each answer is about one
// node, named by its cluster and when it was requested, so that a seeded
// Provider gives a node requested at the same time the same delays whatever
// the policy did before: settings are compared on common random numbers
// (two idle timeouts that both create a node for the same job at the same
// moment see that node take equally long, so their difference is the
// setting's, not the dice's).
type Provider interface {
	// ProvisionDelay is how long the node takes from request to ready.
	ProvisionDelay(n NodeRef) time.Duration
	// DeletionDelay is how long the node takes to be gone once removed; it
	// is billed until then.
	DeletionDelay(n NodeRef) time.Duration
	// EvictAfter is how long the node, low priority and just ready, runs
	// before it is evicted; negative: never.
	EvictAfter(n NodeRef) time.Duration
}

// NodeRef names a simulated node: the K-th node (from 1) that its cluster
// created, the Nth (from 0) of those it requested at the time Requested
// (since the start of the trace).
type NodeRef struct {
	Cluster   string
	K         int
	Requested time.Duration
	Nth       int
}

// Delay is a distribution of delays: uniform in [Mean-Jitter, Mean+Jitter].
type Delay struct {
	Mean, Jitter time.Duration
}

// ParseDelay reads "180s" (fixed) or "180s±60s" ("180s+-60s" too): uniform
// between 120 s and 240 s. A bare number is seconds.
func ParseDelay(s string) (Delay, error) {
	s = strings.TrimSpace(s)
	mean, jitter, found := strings.Cut(s, "±")
	if !found {
		mean, jitter, found = strings.Cut(s, "+-")
	}
	var d Delay
	var err error
	if d.Mean, err = ParseDuration(mean); err != nil {
		return d, fmt.Errorf("delay %q: %w", s, err)
	}
	if found {
		if d.Jitter, err = ParseDuration(jitter); err != nil {
			return d, fmt.Errorf("delay %q: %w", s, err)
		}
	}
	if d.Jitter > d.Mean {
		return d, fmt.Errorf("delay %q: the spread %v is larger than the mean %v", s, d.Jitter, d.Mean)
	}
	return d, nil
}

// String writes the delay as ParseDelay reads it.
func (d Delay) String() string {
	if d.Jitter == 0 {
		return d.Mean.String()
	}
	return d.Mean.String() + "±" + d.Jitter.String()
}

// MarshalText writes the delay as a string in JSON.
func (d Delay) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// ParseDuration reads a Go duration ("2m", "90s") or a bare number of
// seconds; negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := parseSeconds(s)
		if ferr != nil {
			return 0, fmt.Errorf("%q is not a duration (like 90s, 3m or 120)", s)
		}
		d = f
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

func parseSeconds(s string) (time.Duration, error) {
	return seconds("duration", s)
}

// randomProvider draws delays from Delay distributions and evictions from a
// Poisson process of rate per node-hour, from a stream per node and draw.
type randomProvider struct {
	provision, deletion Delay
	rate                float64
	seed                uint64
}

// NewProvider returns the seeded random Provider for provisioning and
// deletion delays and an eviction rate (evictions per node-hour; 0: none).
func NewProvider(provision, deletion Delay, evictionRate float64, seed uint64) Provider {
	return &randomProvider{provision, deletion, evictionRate, seed}
}

// Draws, each its own stream.
const (
	drawProvision = iota
	drawDeletion
	drawEviction
)

// rng is the random stream of one draw for one node, from its cluster and
// when it was requested (not its creation number, which differs between
// settings as soon as one of them created a node the other did not).
func (p *randomProvider) rng(n NodeRef, draw uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(n.Cluster))
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(n.Requested))
	binary.LittleEndian.PutUint64(b[8:], uint64(n.Nth))
	_, _ = h.Write(b[:])
	return rand.New(rand.NewPCG(p.seed^h.Sum64(), draw))
}

func (p *randomProvider) draw(d Delay, n NodeRef, draw uint64) time.Duration {
	if d.Jitter == 0 {
		return d.Mean
	}
	return d.Mean - d.Jitter + time.Duration(p.rng(n, draw).Int64N(int64(2*d.Jitter)+1))
}

func (p *randomProvider) ProvisionDelay(n NodeRef) time.Duration {
	return p.draw(p.provision, n, drawProvision)
}

func (p *randomProvider) DeletionDelay(n NodeRef) time.Duration {
	return p.draw(p.deletion, n, drawDeletion)
}

func (p *randomProvider) EvictAfter(n NodeRef) time.Duration {
	if p.rate <= 0 {
		return -1
	}
	h := p.rng(n, drawEviction).ExpFloat64() / p.rate
	if h*float64(time.Hour) >= math.MaxInt64/2 {
		return -1
	}
	return time.Duration(h * float64(time.Hour))
}
