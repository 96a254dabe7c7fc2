package dispatch

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// An agent sends its latest sample with every poll: the recorder keeps
// one per node per sampling interval, keeps job samples only for the job
// the node runs, and stamps a sample from a node with a wrong clock with
// the server's time.
func TestUsageRecorder(t *testing.T) {
	f := newFixture(t)
	f.job("u1", api.JobRunning, "n1")
	n1 := f.node("n1", api.NodeRunning, "u1")
	clk := clock.NewFake(t0)
	r := &UsageRecorder{DB: f.db, Clock: clk, Interval: 15 * time.Second, Log: slog.New(slog.DiscardHandler)}
	sample := func(at time.Time, jobs ...string) *agentapi.Usage {
		u := &agentapi.Usage{Time: at, CPU: 0.5, MemoryUsed: 1 << 30}
		for _, uid := range jobs {
			u.Jobs = append(u.Jobs, agentapi.JobUsage{UID: uid, CPU: 0.25, MemoryUsed: 1 << 20})
		}
		return u
	}
	r.Record(n1, sample(t0, "u1", "someone-elses"))
	r.Record(n1, sample(t0, "u1"))                    // the same, with the next poll
	r.Record(n1, sample(t0.Add(2*time.Second), "u1")) // too soon
	r.Record(n1, sample(t0.Add(15*time.Second), "u1"))
	r.Record(n1, nil) // an agent that does not sample
	if err := r.Flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	nodeRows, err := store.UsageSamples(f.ctx, f.db.Q(), store.UsageQuery{Compute: f.c.ID})
	if err != nil || len(nodeRows) != 2 || !nodeRows[1].Time.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("node samples: %+v, %v; want two, 15 s apart", nodeRows, err)
	}
	jobRows, err := store.UsageSamples(f.ctx, f.db.Q(), store.UsageQuery{Compute: f.c.ID, Job: "u1"})
	if err != nil || len(jobRows) != 2 {
		t.Fatalf("job samples: %+v, %v; want two", jobRows, err)
	}
	if other, _ := store.UsageSamples(f.ctx, f.db.Q(), store.UsageQuery{Compute: f.c.ID, Job: "someone-elses"}); len(other) != 0 {
		t.Errorf("a node wrote usage of a job it does not run: %+v", other)
	}

	clk.Step(time.Minute)
	r.Record(n1, sample(t0.Add(24*time.Hour))) // a clock a day ahead
	if err := r.Flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	nodeRows, _ = store.UsageSamples(f.ctx, f.db.Q(), store.UsageQuery{Compute: f.c.ID})
	if len(nodeRows) != 3 || !nodeRows[2].Time.Equal(clk.Now()) {
		t.Errorf("a skewed sample is at %v, want the server's %v", nodeRows[len(nodeRows)-1].Time, clk.Now())
	}
	// A poll is held until a little after the agent's next sample: one
	// taken 5 s ago is followed by the next in 10 s.
	for _, c := range []struct {
		r           *UsageRecorder
		taken, want time.Duration
	}{
		{r, 5 * time.Second, 11500 * time.Millisecond},
		{r, 0, 16500 * time.Millisecond},
		{r, time.Hour, 15 * time.Second},         // a clock an hour behind: one interval
		{r, -time.Hour, 15 * time.Second},        // or ahead
		{nil, 5 * time.Second, 20 * time.Second}, // no recorder: the poll timeout
	} {
		if got := c.r.HoldFor(20*time.Second, sample(clk.Now().Add(-c.taken))); got != c.want {
			t.Errorf("a sample taken %v ago: poll held %v, want %v", c.taken, got, c.want)
		}
	}
	if got := r.HoldFor(10*time.Second, sample(clk.Now())); got != 10*time.Second {
		t.Errorf("held %v, longer than the poll timeout", got)
	}
}
