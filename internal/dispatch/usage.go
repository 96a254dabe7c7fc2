package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// DefaultUsageInterval is how often agents sample utilization unless the
// server is configured otherwise.
const DefaultUsageInterval = 15 * time.Second

// usageFlushEvery is how often a replica writes the samples its agents
// sent, in one transaction.
const usageFlushEvery = time.Second

// maxClockSkew: a sample whose time is further than this from the
// server's is stamped with the server's time (the node's clock is off).
const maxClockSkew = 5 * time.Minute

// UsageRecorder keeps the utilization samples agents send with their
// polls: at most one per node per half sampling interval (an agent sends
// its latest sample with every poll, and polls come more often than it
// samples), written in batches so that 10,000 nodes make one write a
// second rather than hundreds. Several replicas each keep their own: a
// sample that reaches two is stored once (the store keys samples by
// node, job and time).
type UsageRecorder struct {
	DB       *store.DB
	Clock    clock.Clock
	Interval time.Duration // the agents' sampling interval
	Log      *slog.Logger

	mu      sync.Mutex
	last    map[string]time.Time // node → time of its last sample kept
	pending []store.UsageRow

	flushMu sync.Mutex        // one Flush at a time
	names   map[string]string // job uid → name, for the metrics' labels (under flushMu)
}

// Record keeps a node's sample for the next flush. Job samples are kept
// only for the job the store says the node runs: a node cannot write
// another job's usage.
func (r *UsageRecorder) Record(node store.Node, u *agentapi.Usage) {
	if u == nil || u.Time.IsZero() {
		return
	}
	now := r.Clock.Now().UTC()
	at := u.Time.UTC()
	if d := at.Sub(now); d > maxClockSkew || d < -maxClockSkew {
		at = now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if prev, ok := r.last[node.ID]; ok && at.Sub(prev) < r.Interval/2 {
		return // this sample, or one too soon after it
	}
	r.last[node.ID] = at
	compute := store.Key(node.Compute)
	jobs := u.Jobs
	nodeOnly := *u
	nodeOnly.Jobs = nil
	body, err := json.Marshal(nodeOnly)
	if err != nil {
		return
	}
	r.pending = append(r.pending, store.UsageRow{Compute: compute, Node: node.ID, Time: at, Body: string(body),
		Latest: store.UsageValues{CPU: u.CPU, MemoryUsed: u.MemoryUsed, MemoryTotal: u.MemoryTotal, DiskUsed: u.DiskUsed,
			NetworkRx: u.NetworkReceived, NetworkTx: u.NetworkSent, GPUs: agentapi.FormatGPUs(u.GPUs)}})
	for _, j := range jobs {
		if j.UID == "" || j.UID != node.JobID {
			continue
		}
		body, err := json.Marshal(j)
		if err != nil {
			continue
		}
		r.pending = append(r.pending, store.UsageRow{Compute: compute, Node: node.ID, Job: j.UID, Time: at, Body: string(body),
			Latest: store.UsageValues{CPU: j.CPU, MemoryUsed: j.MemoryUsed, GPUs: agentapi.FormatGPUs(j.GPUs)}})
	}
}

// Flush writes the samples kept so far. Samples that cannot be written
// are dropped (utilization is a view, not state: the next ones follow).
func (r *UsageRecorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	rows := r.pending
	r.pending = nil
	// Forget nodes not heard from for a while (removed, or polling
	// another replica).
	cutoff := r.Clock.Now().Add(-10 * max(r.Interval, time.Minute))
	for n, t := range r.last {
		if t.Before(cutoff) {
			delete(r.last, n)
		}
	}
	r.mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	if err := r.nameJobs(ctx, rows); err != nil {
		return err
	}
	return r.DB.Tx(ctx, func(q store.Querier) error { return store.PutUsage(ctx, q, rows) })
}

// nameJobs gives job samples their job's name, read once per job.
func (r *UsageRecorder) nameJobs(ctx context.Context, rows []store.UsageRow) error {
	if r.names == nil || len(r.names) > 10_000 {
		r.names = map[string]string{}
	}
	for i := range rows {
		uid := rows[i].Job
		if uid == "" {
			continue
		}
		name, ok := r.names[uid]
		if !ok {
			j, err := store.GetJobByUID(ctx, r.DB.Q(), uid)
			switch {
			case errors.Is(err, store.ErrNotFound):
				name = uid // deleted meanwhile
			case err != nil:
				return fmt.Errorf("name of job %s: %w", uid, err)
			default:
				name = j.Doc.Name
			}
			r.names[uid] = name
		}
		rows[i].JobName = name
	}
	return nil
}

// Run flushes every second until ctx ends, then once more.
func (r *UsageRecorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.Flush(fctx); err != nil {
				r.Log.Warn("write utilization samples", "err", err)
			}
			return
		case <-r.Clock.After(usageFlushEvery):
		}
		if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.Log.Warn("write utilization samples; they are dropped", "err", err)
		}
	}
}

// HoldFor is how long a poll that carries sample u may be held: until a
// little after the agent takes its next one, so that the next poll
// carries it (held a whole interval from whenever it came, a poll could
// come back just before the next sample, again and again, and every other
// sample would be lost). A node whose clock is off is held one interval.
func (r *UsageRecorder) HoldFor(pollTimeout time.Duration, u *agentapi.Usage) time.Duration {
	if r == nil || r.Interval <= 0 || u == nil {
		return pollTimeout
	}
	hold := u.Time.Add(r.Interval + r.Interval/10).Sub(r.Clock.Now())
	if hold < r.Interval/4 || hold > 2*r.Interval {
		hold = r.Interval
	}
	return min(pollTimeout, hold)
}
