package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/parallel"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A parallel step's mini-batches go to its nodes' drivers through
// Parallel: each call reports how the mini-batches a node ran ended (their
// rows kept with their end, in one transaction) and asks for more, which
// are handed out lowest first to whoever asks — a slow node asks less
// often and so takes fewer. A failed or timed-out mini-batch runs again up
// to retry_settings.max_retries; a node that stops answering loses its
// mini-batches to the others when their leases run out, a node that is
// lost at once (lifecycle). The step fails once its thresholds are passed.

// maxBatchRows bounds the rows one mini-batch keeps.
const maxBatchRows = 64 << 20

// Parallel is one exchange with a node's driver for job uid.
func (s *Service) Parallel(ctx context.Context, nodeID, uid string, req agentapi.ParallelRequest) (agentapi.ParallelResponse, error) {
	var resp agentapi.ParallelResponse
	now := s.Clock.Now().UTC()
	err := s.DB.Tx(ctx, func(q store.Querier) error {
		var err error
		resp, err = exchange(ctx, q, nodeID, uid, req, now)
		return err
	})
	return resp, err
}

func exchange(ctx context.Context, q store.Querier, nodeID, uid string, req agentapi.ParallelRequest, now time.Time) (agentapi.ParallelResponse, error) {
	var resp agentapi.ParallelResponse
	j, err := store.GetJobByUID(ctx, q, uid)
	if errors.Is(err, store.ErrNotFound) {
		return resp, conflict("job " + uid + " is not known")
	}
	if err != nil {
		return resp, err
	}
	p := &j.Doc.Properties
	if !j.Doc.IsParallel() || p.ParallelSpec == nil {
		return resp, conflict("job " + j.Doc.Name + " is not a parallel step")
	}
	if api.JobTerminal(p.Status) || req.Attempt != j.Attempt || !slices.Contains(j.Nodes, nodeID) || hasExited(j, nodeID) {
		resp.Failed = "the step's attempt " + fmt.Sprint(req.Attempt) + " no longer runs on this node"
		return resp, nil
	}
	settings := j.Doc.ParallelSettings()
	st := p.Parallel
	if st == nil || st.MiniBatches == 0 {
		if req.Plan == nil {
			resp.Progress = "waiting for this node's plan of the mini-batches"
			return resp, nil
		}
		items := 0
		for _, n := range req.Plan.Items {
			items += n
		}
		if err := store.PlanBatches(ctx, q, j.UID, req.Plan.Items); err != nil {
			return resp, err
		}
		p.Parallel = &api.ParallelStatus{MiniBatches: len(req.Plan.Items), Items: items, Planned: &now, Digest: req.Plan.Digest}
		if err := store.UpdateJob(ctx, q, &j); err != nil {
			return resp, err
		}
		st = p.Parallel
	} else if req.Plan != nil && req.Plan.Digest != st.Digest {
		return resp, &Error{Kind: ErrConflict, Msg: fmt.Sprintf("node %s split input_data into %d mini-batches (%s), the first node into %d (%s): the input differs between nodes",
			nodeID, len(req.Plan.Items), req.Plan.Digest, st.MiniBatches, st.Digest)}
	}
	if st.MiniBatches == 0 {
		resp.Finished, resp.Progress = true, "input_data holds no items"
		return resp, nil
	}
	for _, r := range req.Results {
		b, err := store.GetBatch(ctx, q, j.UID, r.Index)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return resp, err
		}
		if b.State != store.BatchRunning || b.Node != nodeID || b.Attempt != j.Attempt {
			continue // handed to another since (its lease ran out): that run counts
		}
		if r.OK {
			rows := strings.Join(r.Rows, "\n")
			if rows != "" {
				rows += "\n"
			}
			if len(rows) > maxBatchRows {
				r.OK, r.Error = false, fmt.Sprintf("run() returned %d bytes of rows, more than the %d a mini-batch may keep", len(rows), maxBatchRows)
			} else {
				b.State, b.Rows, b.Error, b.Node, b.Ended = store.BatchDone, rows, "", "", now
				if err := store.PutBatch(ctx, q, b); err != nil {
					return resp, err
				}
				continue
			}
		}
		if err := failBatch(ctx, q, b, r.Error, r.Items, settings, now); err != nil {
			return resp, err
		}
	}
	lease := now.Add(parallel.LeaseFor(settings))
	for _, idx := range req.Running {
		b, err := store.GetBatch(ctx, q, j.UID, idx)
		if err != nil {
			continue
		}
		if b.State == store.BatchRunning && b.Node == nodeID && b.Attempt == j.Attempt {
			b.Lease = lease
			if err := store.PutBatch(ctx, q, b); err != nil {
				return resp, err
			}
		}
	}
	expired, err := store.ExpiredBatches(ctx, q, j.UID, now)
	if err != nil {
		return resp, err
	}
	for _, b := range expired {
		why := fmt.Sprintf("node %s held it past retry_settings.timeout (%s) without a word", b.Node, settings.Timeout)
		if err := failBatch(ctx, q, b, why, nil, settings, now); err != nil {
			return resp, err
		}
	}
	// What the thresholds and the end need is read from the failed
	// mini-batches and whether any is still open (ranges of the state
	// index); every state is counted only for a progress line.
	c := parallel.Counts{Total: st.MiniBatches}
	if c.Failed, c.FailedItems, err = store.FailedBatchStats(ctx, q, j.UID); err != nil {
		return resp, err
	}
	line := func() (string, error) {
		all, err := store.BatchCounts(ctx, q, j.UID)
		return ProgressLine(all, *st, now), err
	}
	if failed, why := parallel.Verdict(c, settings); failed {
		if st.Verdict == "" {
			st.Verdict = why
			if err := store.UpdateJob(ctx, q, &j); err != nil {
				return resp, err
			}
		}
		resp.Failed = why
		resp.Progress, err = line()
		return resp, err
	}
	open, err := store.BatchesOpen(ctx, q, j.UID)
	if err != nil {
		return resp, err
	}
	if !open {
		resp.Finished = true
		resp.Progress, err = line()
		return resp, err
	}
	leased, err := store.LeaseBatches(ctx, q, j.UID, nodeID, j.Attempt, min(req.Want, 64), lease)
	if err != nil {
		return resp, err
	}
	for _, b := range leased {
		resp.Batches = append(resp.Batches, agentapi.LeasedBatch{Index: b.Idx, Try: b.Tries})
	}
	if req.Progress {
		resp.Progress, err = line()
	}
	return resp, err
}

// hasExited reports whether a node's part of the job's attempt ended.
func hasExited(j store.Job, node string) bool {
	_, ok := j.Exits[node]
	return ok
}

// failBatch ends one run of a mini-batch in failure: it runs again, or it
// has failed for good (its items count as failed).
func failBatch(ctx context.Context, q store.Querier, b store.Batch, why string, items []string, s parallel.Settings, now time.Time) error {
	if why == "" {
		why = "run() failed"
	}
	b.Error, b.Node = why, ""
	if len(items) > 0 {
		b.ItemNames = items
	}
	if parallel.Retry(b.Tries, s) {
		b.State, b.Retries = store.BatchPending, b.Retries+1
	} else {
		b.State, b.FailedItems, b.Ended = store.BatchFailed, b.Items, now
	}
	return store.PutBatch(ctx, q, b)
}

// ProgressLine words where a step's mini-batches stand.
func ProgressLine(c parallel.Counts, st api.ParallelStatus, now time.Time) string {
	line := fmt.Sprintf("mini-batches: %d of %d done, %d failed, %d running, %d pending, %d retried", c.Done, c.Total, c.Failed, c.Running, c.Pending, c.Retried)
	if st.Planned != nil {
		if rate, left := parallel.Progress(c, *st.Planned, now); left >= 0 {
			line += fmt.Sprintf("; %.2f/s, about %s left", rate, left)
		}
	}
	return line
}

// ParallelView fills a parallel step's progress (counts, rate, time left
// and its failed mini-batches) from its mini-batches.
func ParallelView(ctx context.Context, q store.Querier, j *api.Job, uid string, now time.Time) error {
	p := &j.Properties
	if p.ParallelSpec == nil || p.Parallel == nil {
		return nil
	}
	st := *p.Parallel
	c, err := store.BatchCounts(ctx, q, uid)
	if err != nil {
		return err
	}
	st.Done, st.Failed, st.Running, st.Pending, st.Retried, st.FailedItems = c.Done, c.Failed, c.Running, c.Pending, c.Retried, c.FailedItems
	end := now
	if j.Properties.EndTime != nil {
		end = *j.Properties.EndTime
	}
	if st.Planned != nil {
		rate, left := parallel.Progress(c, *st.Planned, end)
		st.PerSecond = rate
		if left >= 0 {
			secs := int64(left / time.Second)
			st.SecondsLeft = &secs
		}
	}
	failed, err := store.FailedBatches(ctx, q, uid, 100)
	if err != nil {
		return err
	}
	st.Failures = nil
	for _, b := range failed {
		f := api.MiniBatchFailure{Index: b.Idx, Tries: b.Tries, Items: b.ItemNames, Error: b.Error}
		if !b.Ended.IsZero() {
			f.Ended = &b.Ended
		}
		st.Failures = append(st.Failures, f)
	}
	spec := *p.ParallelSpec
	spec.Parallel = &st
	p.ParallelSpec = &spec
	return nil
}

// RowsRank is the rank under which the server stores the rows file of a
// parallel step's output, after every node's upload: readers get it merged
// with what the nodes wrote there.
const RowsRank = 1 << 20

// RowsOutputs is where parallel steps' rows files are written.
type RowsOutputs interface {
	Has(uid, name string) bool
	HasPart(uid, name string, attempt, rank int) bool
	Put(uid, name string, attempt, rank int, r io.Reader, maxBytes int64) error
}

// WriteRows writes a parallel step's rows file into its append_row_to
// output (once the step has ended; again it writes nothing): the rows of
// every mini-batch that completed, in mini-batch order.
func WriteRows(ctx context.Context, q store.Querier, out RowsOutputs, j store.Job) error {
	if !j.Doc.IsParallel() || !api.JobTerminal(j.Doc.Properties.Status) || j.Attempt == 0 {
		return nil
	}
	name, file := j.Doc.ParallelRows()
	if name == "" || out.HasPart(j.UID, name, j.Attempt, RowsRank) {
		return nil
	}
	var rows bytes.Buffer
	if err := store.BatchRows(ctx, q, j.UID, func(r string) error { rows.WriteString(r); return nil }); err != nil {
		return err
	}
	var archive bytes.Buffer
	if err := files.PackFile(&archive, file, rows.Bytes()); err != nil {
		return err
	}
	return out.Put(j.UID, name, j.Attempt, RowsRank, &archive, int64(archive.Len())+1)
}

// parallelOf is what a parallel step's node runs: the driver's settings.
func parallelOf(j api.Job, n store.Node) *agentapi.Parallel {
	spec := j.Properties.ParallelSpec
	if !j.IsParallel() || spec == nil || spec.Task == nil {
		return nil
	}
	in := j.ParallelInput()
	workers := int(spec.MaxConcurrencyPerInstance)
	if workers <= 0 { // az ml's default: a process per core, one per GPU node
		workers = 1
		if size, ok := catalog.Lookup(n.VMSize); ok && size.GPUs == 0 && size.VCPUs > 0 {
			workers = size.VCPUs
		}
	}
	rows, file := j.ParallelRows()
	return &agentapi.Parallel{EntryScript: spec.Task.EntryScript, Input: in, InputType: strings.ToLower(j.Properties.Inputs[in].JobInputType),
		MiniBatch: string(spec.MiniBatchSize), Partition: spec.PartitionKeys, Workers: workers,
		Timeout: j.ParallelSettings().Timeout, LogLevel: spec.LoggingLevel, RowsDir: rows, RowsFile: file}
}
