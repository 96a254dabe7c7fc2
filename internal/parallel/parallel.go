// Package parallel holds the decisions of a parallel step (batch
// inference): what happens to a mini-batch that failed or outlived its
// lease, when the step has failed too many to go on, how long a node holds
// a mini-batch, and how far along the step is. Mini-batches are handed out
// one by one to whichever worker asks (a slow node simply asks less
// often). It is pure: no I/O, no clock reads.
package parallel

import (
	"fmt"
	"time"
)

// Settings are a parallel step's limits, as its YAML gives them.
type Settings struct {
	// MaxRetries is how many times a failed mini-batch is run again
	// before it counts as failed (retry_settings.max_retries).
	MaxRetries int
	// Timeout bounds one run(mini_batch) (retry_settings.timeout): the
	// node's driver stops a worker past it, and a node that stops
	// answering loses its mini-batches after LeaseFor.
	Timeout time.Duration
	// MiniBatchErrorThreshold is how many mini-batches may fail before the
	// step fails (-1: any number).
	MiniBatchErrorThreshold int
	// ErrorThreshold is how many items may fail (items of failed
	// mini-batches, and those a run returned no row for) before the step
	// fails (-1: any number).
	ErrorThreshold int
	// AllowedFailedPercent is the share of mini-batches that may fail
	// (100: any).
	AllowedFailedPercent int
}

// Counts are how a step's mini-batches stand.
type Counts struct {
	Total, Pending, Running, Done, Failed int
	// Retried counts runs that failed or timed out and were handed out
	// again; Items and FailedItems count items (files or rows).
	Retried, Items, FailedItems int
}

// Retry says whether a mini-batch that has now failed tries times runs
// again; false: it counts as failed.
func Retry(tries int, s Settings) bool { return tries <= s.MaxRetries }

// Finished reports whether every mini-batch has ended (done or failed).
func Finished(c Counts) bool { return c.Total > 0 && c.Pending == 0 && c.Running == 0 }

// Verdict says whether the failures so far fail the step, and why.
func Verdict(c Counts, s Settings) (failed bool, reason string) {
	switch {
	case s.MiniBatchErrorThreshold >= 0 && c.Failed > s.MiniBatchErrorThreshold:
		return true, fmt.Sprintf("%d mini-batches failed, more than mini_batch_error_threshold %d", c.Failed, s.MiniBatchErrorThreshold)
	case s.ErrorThreshold >= 0 && c.FailedItems > s.ErrorThreshold:
		return true, fmt.Sprintf("%d items failed, more than error_threshold %d", c.FailedItems, s.ErrorThreshold)
	case s.AllowedFailedPercent < 100 && c.Total > 0 && c.Failed*100 > s.AllowedFailedPercent*c.Total:
		return true, fmt.Sprintf("%d of %d mini-batches failed, more than allowed_failed_percent %d%%", c.Failed, c.Total, s.AllowedFailedPercent)
	}
	return false, ""
}

// LeaseSlack is how long past its timeout a node may hold a mini-batch
// without a word before it is handed to another: the node's driver
// renews its leases every few seconds while it runs them.
const LeaseSlack = time.Minute

// LeaseFor is how long a node holds a mini-batch from when it last said it
// runs it.
func LeaseFor(s Settings) time.Duration { return s.Timeout + LeaseSlack }

// Progress is how fast mini-batches end and about how long the rest takes
// at that pace, from the step's first hand-out (started) to now; left is
// -1 before anything ended.
func Progress(c Counts, started, now time.Time) (perSecond float64, left time.Duration) {
	ended := c.Done + c.Failed
	el := now.Sub(started)
	if ended == 0 || el <= 0 {
		return 0, -1
	}
	perSecond = float64(ended) / el.Seconds()
	rest := c.Total - ended
	return perSecond, time.Duration(float64(rest) / perSecond * float64(time.Second)).Round(time.Second)
}

// ItemsPerSecond is the rate of items in the mini-batches that ended.
func ItemsPerSecond(doneItems int, started, now time.Time) float64 {
	el := now.Sub(started)
	if el <= 0 {
		return 0
	}
	return float64(doneItems) / el.Seconds()
}
