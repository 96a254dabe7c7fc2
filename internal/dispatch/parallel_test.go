package dispatch

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// parallelJob stores a parallel step's job running on nodes, with
// max_retries 1 and mini_batch_error_threshold 1.
func (f *fixture) parallelJob(uid string, nodes ...string) store.Job {
	f.t.Helper()
	j := f.job(uid, api.JobRunning, nodes...)
	one, retries, timeout := int32(1), int32(1), int32(30)
	p := &j.Doc.Properties
	p.JobType = api.JobTypeParallel
	p.Inputs = map[string]api.JobInput{"files": {JobInputType: "uri_folder", URI: api.BlobURIScheme + strings.Repeat("a", 64)}}
	p.Outputs = map[string]api.JobOutput{"scores": {JobOutputType: "uri_folder"}}
	p.ParallelSpec = &api.ParallelSpec{InputData: "${{inputs.files}}", MiniBatchSize: "2", MiniBatchErrorThreshold: &one,
		RetrySettings: &api.RetrySettings{MaxRetries: &retries, Timeout: &timeout},
		Task:          &api.ParallelTask{Type: "run_function", EntryScript: "score.py", Code: "c", AppendRowTo: "${{outputs.scores}}"}}
	if err := store.UpdateJob(f.ctx, f.db.W(), &j); err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) exchange(node, uid string, req agentapi.ParallelRequest, at time.Time) agentapi.ParallelResponse {
	f.t.Helper()
	var resp agentapi.ParallelResponse
	f.tx(func(q store.Querier) error {
		var err error
		resp, err = exchange(f.ctx, q, node, uid, req, at)
		return err
	})
	return resp
}

func indexes(bs []agentapi.LeasedBatch) []int {
	var out []int
	for _, b := range bs {
		out = append(out, b.Index)
	}
	return out
}

// Mini-batches go to whoever asks, lowest first; a failed one runs again
// up to max_retries, then counts against mini_batch_error_threshold; the
// rows of the ones that completed are kept once, in order, in the step's
// output; the step finishes when every mini-batch has ended.
func TestParallelExchange(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "p")
	f.node("n2", api.NodeRunning, "p")
	f.parallelJob("p", "n1", "n2")
	plan := &agentapi.ParallelPlan{Items: []int{2, 2, 2, 1}, Digest: "d1"}

	r := f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Plan: plan, Want: 2}, t0)
	if got := indexes(r.Batches); len(got) != 2 || got[0] != 0 || got[1] != 1 || r.Finished || r.Failed != "" {
		t.Fatalf("n1's first ask: %+v", r)
	}
	// Another node that split the data differently is refused.
	var err error
	f.tx(func(q store.Querier) error {
		_, err = exchange(f.ctx, q, "n2", "p", agentapi.ParallelRequest{Attempt: 1, Plan: &agentapi.ParallelPlan{Items: []int{7}, Digest: "other"}, Want: 1}, t0)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "differs between nodes") {
		t.Fatalf("a different split: %v", err)
	}
	r = f.exchange("n2", "p", agentapi.ParallelRequest{Attempt: 1, Plan: plan, Want: 5}, t0)
	if got := indexes(r.Batches); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("n2 gets the rest: %+v", r)
	}
	// A node reporting what another holds changes nothing.
	r = f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Results: []agentapi.BatchResult{{Index: 2, OK: true, Rows: []string{"stolen"}}}}, t0)
	// n1: mini-batch 0 done, 1 failed once (runs again).
	r = f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Want: 1, Results: []agentapi.BatchResult{
		{Index: 0, OK: true, Rows: []string{"a 1", "b 2"}}, {Index: 1, OK: false, Error: "ValueError: bad", Items: []string{"c", "d"}}}}, t0)
	if got := indexes(r.Batches); len(got) != 1 || got[0] != 1 {
		t.Fatalf("the failed mini-batch comes back: %+v", r)
	}
	// It fails again: max_retries 1 is spent, it has failed (1 ≤ threshold 1).
	r = f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Want: 1, Results: []agentapi.BatchResult{{Index: 1, OK: false, Error: "ValueError: bad", Items: []string{"c", "d"}}}}, t0)
	if len(r.Batches) != 0 || r.Failed != "" || r.Finished {
		t.Fatalf("after the second failure: %+v", r)
	}
	r = f.exchange("n2", "p", agentapi.ParallelRequest{Attempt: 1, Results: []agentapi.BatchResult{
		{Index: 2, OK: true, Rows: []string{"e 5", "f 6"}}, {Index: 3, OK: true, Rows: []string{"g 7"}}}}, t0)
	if !r.Finished || !strings.Contains(r.Progress, "3 of 4 done, 1 failed") {
		t.Fatalf("every mini-batch ended: %+v", r)
	}
	c, err := store.BatchCounts(f.ctx, f.db.Q(), "p")
	if err != nil || c.Done != 3 || c.Failed != 1 || c.Retried != 1 || c.FailedItems != 2 || c.Items != 7 {
		t.Fatalf("counts %+v, %v", c, err)
	}

	// The step's view: progress and the failed mini-batch's summary.
	j := f.getJob("p")
	v := j.Doc
	if err := ParallelView(f.ctx, f.db.Q(), &v, "p", t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	st := v.Properties.Parallel
	if st.MiniBatches != 4 || st.Done != 3 || st.PerSecond != 1 || len(st.Failures) != 1 || st.Failures[0].Index != 1 || st.Failures[0].Tries != 2 ||
		strings.Join(st.Failures[0].Items, ",") != "c,d" || st.Failures[0].Error != "ValueError: bad" {
		t.Fatalf("view: %+v", st)
	}

	// The rows file, once the step has ended: every completed mini-batch's
	// rows in mini-batch order.
	j.Doc.SetStatus(api.JobCompleted, t0, "")
	outs := files.Outputs{Dir: t.TempDir()}
	if err := WriteRows(f.ctx, f.db.Q(), outs, j); err != nil {
		t.Fatal(err)
	}
	if got := readOne(t, outs, "p", "scores", "parallel_run_step.txt"); got != "a 1\nb 2\ne 5\nf 6\ng 7\n" {
		t.Fatalf("rows file %q", got)
	}
}

// A mini-batch whose node goes quiet past its lease runs elsewhere (a
// failed try); a node lost is released at once, its try not counted; and
// passing mini_batch_error_threshold fails the step with why.
func TestParallelLeasesAndThresholds(t *testing.T) {
	f := newFixture(t)
	f.node("n1", api.NodeRunning, "p")
	f.node("n2", api.NodeRunning, "p")
	f.parallelJob("p", "n1", "n2")
	plan := &agentapi.ParallelPlan{Items: []int{2, 2, 2, 2}, Digest: "d"}
	f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Plan: plan, Want: 1}, t0)                     // 0 → n1
	f.exchange("n2", "p", agentapi.ParallelRequest{Attempt: 1, Plan: plan, Want: 1}, t0)                     // 1 → n2
	r := f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Running: []int{0}}, t0.Add(time.Minute)) // renews 0
	later := t0.Add(30*time.Second + time.Minute + time.Second)                                              // past n2's lease, not n1's
	r = f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Running: []int{0}, Want: 3}, later)
	if got := indexes(r.Batches); len(got) != 3 || got[0] != 1 {
		t.Fatalf("n2's quiet mini-batch goes to n1 first: %+v", r)
	}
	b, err := store.GetBatch(f.ctx, f.db.Q(), "p", 1)
	if err != nil || b.Tries != 2 || b.Retries != 1 || !strings.Contains(b.Error, "node n2 held it past") {
		t.Fatalf("the expired mini-batch: %+v %v", b, err)
	}
	// n1 is lost: its mini-batches go back, their tries not counted, and
	// the step goes on on n2.
	n1 := f.getNode("n1")
	f.tx(func(q store.Querier) error {
		return lifecycle.NodeLost(f.ctx, q, n1, api.NodeUnusable, "gone", 3, later)
	})
	j := f.getJob("p")
	if j.Doc.Properties.Status != api.JobRunning || j.Exits["n1"] != -1 {
		t.Fatalf("after losing n1 the step runs on: %s %+v", j.Doc.Properties.Status, j.Exits)
	}
	b, _ = store.GetBatch(f.ctx, f.db.Q(), "p", 1)
	if b.State != store.BatchPending || b.Tries != 1 {
		t.Fatalf("n1's mini-batch back in the queue: %+v", b)
	}
	// Every run fails: once two mini-batches have failed for good (each
	// after its retry), more than the threshold of 1, the step fails.
	r = f.exchange("n2", "p", agentapi.ParallelRequest{Attempt: 1, Want: 1}, later)
	for i := 0; i < 10 && r.Failed == ""; i++ {
		var res []agentapi.BatchResult
		for _, lb := range r.Batches {
			res = append(res, agentapi.BatchResult{Index: lb.Index, OK: false, Error: "boom"})
		}
		r = f.exchange("n2", "p", agentapi.ParallelRequest{Attempt: 1, Results: res, Want: 1}, later)
	}
	if !strings.Contains(r.Failed, "2 mini-batches failed, more than mini_batch_error_threshold 1") {
		t.Fatalf("the step fails past its threshold: %+v", r)
	}
	if v := f.getJob("p").Doc.Properties.Parallel.Verdict; !strings.Contains(v, "mini_batch_error_threshold") {
		t.Fatalf("verdict %q", v)
	}
	// The lost node's driver, should it speak again, is told to stop.
	if r := f.exchange("n1", "p", agentapi.ParallelRequest{Attempt: 1, Want: 1}, later); r.Failed == "" || len(r.Batches) > 0 {
		t.Fatalf("a lost node gets nothing: %+v", r)
	}
}

func readOne(t *testing.T, outs files.Outputs, uid, output, name string) string {
	t.Helper()
	f, err := outs.Open(uid, output)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the output: %v", name, err)
		}
		if h.Name == name {
			b, _ := io.ReadAll(tr)
			return string(b)
		}
	}
}

// BenchmarkParallelExchange is the control plane's share of a mini-batch:
// one exchange that records the end of the mini-batch a node ran (with
// ten rows) and hands it the next, in one SQLite transaction, on a step of
// 100,000 mini-batches.
//
//	go test ./internal/dispatch/ -run '^$' -bench ParallelExchange -benchtime 20000x
func BenchmarkParallelExchange(b *testing.B) {
	f := newFixture(b)
	f.node("n1", api.NodeRunning, "p")
	f.parallelJob("p", "n1")
	items := make([]int, 100_000)
	for i := range items {
		items[i] = 10
	}
	rows := make([]string, 10)
	for i := range rows {
		rows[i] = fmt.Sprintf("f%06d.txt 12", i)
	}
	ctx := context.Background()
	svc := &Service{DB: f.db, Clock: clock.NewFake(t0)}
	resp, err := svc.Parallel(ctx, "n1", "p", agentapi.ParallelRequest{Attempt: 1, Plan: &agentapi.ParallelPlan{Items: items, Digest: "d"}, Want: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res := []agentapi.BatchResult{{Index: resp.Batches[0].Index, OK: true, Rows: rows}}
		resp, err = svc.Parallel(ctx, "n1", "p", agentapi.ParallelRequest{Attempt: 1, Results: res, Running: nil, Want: 1})
		if err != nil || len(resp.Batches) != 1 {
			b.Fatalf("%+v %v", resp, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/mini-batch")
}
