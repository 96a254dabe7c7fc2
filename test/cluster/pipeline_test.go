package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The batch-scoring pipeline of these tests, in the az ml YAML: a command
// step writes 40 one-line files, a parallel step scores them in
// mini-batches of 5 on 2 nodes × 2 worker processes (item_13 makes its
// mini-batch fail on every try, within mini_batch_error_threshold 1), and
// a command step counts the rows the scores appended to one file.
const scoringPipeline = `$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
name: PIPELINE
display_name: score-files
experiment_name: batch-scoring
settings:
  default_compute: azureml:cpu-cluster
jobs:
  make_files:
    type: command
    code: ./make
    command: python3 make.py ${{outputs.files}} SLEEP
    environment: azureml:scoring-env:1
    outputs:
      files:
        type: uri_folder
  score:
    type: parallel
    inputs:
      files:
        type: uri_folder
        path: ${{parent.jobs.make_files.outputs.files}}
    outputs:
      scores:
        type: uri_folder
    input_data: ${{inputs.files}}
    mini_batch_size: "5"
    resources:
      instance_count: 2
    max_concurrency_per_instance: 2
    mini_batch_error_threshold: 1
    retry_settings:
      max_retries: 2
      timeout: 60
    logging_level: INFO
    task:
      type: run_function
      code: ./score
      entry_script: score.py
      environment: azureml:scoring-env:1
      program_arguments: --prefix scored --pause PAUSEBARRIER
      append_row_to: ${{outputs.scores}}
  count:
    type: command
    code: ./count
    command: python3 count.py ${{inputs.scores}} ${{outputs.summary}}
    environment: azureml:scoring-env:1
    inputs:
      scores: ${{parent.jobs.score.outputs.scores}}
    outputs:
      summary:
        type: uri_folder
`

// writeScoringPipeline writes the pipeline and its three code folders into
// dir; sleep delays the first step, pause each item's scoring. With a
// barrier folder, no worker scores its first mini-batch before workers of
// both nodes have started (each says so there): the mini-batches are then
// shared by the nodes however much later one's workers start.
func writeScoringPipeline(t *testing.T, dir, name string, sleep, pause float64, barrier string) {
	t.Helper()
	if barrier != "" {
		barrier = " --barrier " + barrier
	}
	y := strings.NewReplacer("PIPELINE", name, "SLEEP", fmtFloat(sleep), "PAUSEBARRIER", fmtFloat(pause)+barrier).Replace(scoringPipeline)
	write(t, filepath.Join(dir, "pipeline.yml"), y)
	write(t, filepath.Join(dir, "make", "make.py"), `import os, sys, time
out = sys.argv[1]
time.sleep(float(sys.argv[2]))
for i in range(40):
    with open(os.path.join(out, "item_%02d.txt" % i), "w") as f:
        f.write("value %d\n" % (i * i))
print("wrote 40 files to", out)
`)
	write(t, filepath.Join(dir, "score", "score.py"), `import argparse, os, time

def init():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--prefix")
    p.add_argument("--pause", type=float, default=0)
    p.add_argument("--barrier", default="")
    args, _ = p.parse_known_args()
    print("init in pid", os.getpid(), "on node", os.environ.get("CUMULUS_NODE_ID"), flush=True)
    if args.barrier:
        open(os.path.join(args.barrier, "%s-%d" % (os.environ.get("CUMULUS_NODE_ID"), os.getpid())), "w").close()

waited = False

def run(mini_batch):
    global waited
    if args.barrier and not waited:
        deadline = time.time() + 30  # below the mini-batch timeout (60 s)
        while len({f.rsplit("-", 1)[0] for f in os.listdir(args.barrier)}) < 2 and time.time() < deadline:
            time.sleep(0.05)
        waited = True
    rows = []
    for path in mini_batch:
        name = os.path.basename(path)
        if name == "item_13.txt":
            raise ValueError("cannot score " + name)
        time.sleep(args.pause)
        value = open(path).read().split()[1]
        rows.append("%s %s %s %s" % (args.prefix, name, value, os.environ.get("CUMULUS_NODE_ID")))
    print("scored", len(rows), "items", flush=True)
    return rows
`)
	write(t, filepath.Join(dir, "count", "count.py"), `import os, sys
rows = open(os.path.join(sys.argv[1], "parallel_run_step.txt")).read().splitlines()
print("rows=%d" % len(rows))
with open(os.path.join(sys.argv[2], "count.txt"), "w") as f:
    f.write("%d\n" % len(rows))
`)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// localProcesses makes the local nodes run every job as a plain process
// with this machine's Python (no container runtime answers): the
// registered environment's image is not pulled.
func localProcesses(t testing.TB) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
}

// The pipeline as written, through the CLI: the environment is
// registered once, the three steps run in order on the cluster, the
// parallel step runs on 2 nodes × 2 workers, its one bad mini-batch fails
// after its retries without failing the step, and the last step reads the
// 35 appended rows. The steps' jobs, their logs in order and the
// pipeline's outputs are there through the CLI.
func TestPipelineBatchScoring(t *testing.T) {
	localProcesses(t)
	s := startServer(t)
	s.createCompute("cpu-cluster", 0, 2, "PT60S")
	dir := t.TempDir()
	writeScoringPipeline(t, dir, "scoring", 0, 0.05, t.TempDir())
	if out, errOut, code := s.cli(dir, "environment", "create", "--name", "scoring-env", "--version", "1", "--image", "python:3.11-slim"); code != 0 {
		t.Fatalf("environment create: %s %s", out, errOut)
	}
	out, errOut, code := s.cli(dir, "job", "create", "--file", "pipeline.yml", "--stream")
	if code != 0 {
		t.Fatalf("job create --stream exited %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"wrote 40 files", "rows=35", "mini-batch 2 failed: ValueError: cannot score item_13.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("the streamed logs lack %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("streamed:\n%s\n%s", out, errOut)
		}
	})
	// Each step's log, in the order the steps ran.
	i, j, k := strings.Index(errOut, "=== step make_files"), strings.Index(errOut, "=== step score"), strings.Index(errOut, "=== step count")
	if i < 0 || j < i || k < j {
		t.Errorf("steps streamed out of order:\n%s", errOut)
	}

	pj := s.job("scoring")
	if pj.Properties.Status != api.JobCompleted || pj.Properties.Pipeline == nil {
		t.Fatalf("pipeline %s: %s", pj.Properties.Status, pj.Properties.StatusMessage)
	}
	for _, step := range []string{"make_files", "score", "count"} {
		if ss := pj.Properties.Pipeline.Steps[step]; ss == nil || ss.Status != api.JobCompleted || ss.Job != "scoring_"+step {
			t.Errorf("step %s: %+v", step, ss)
		}
	}
	// A step's output reaches the next step at its datastore path, as in
	// Azure ML; a parallel step's (its rows file is the control plane's)
	// as a snapshot.
	files := pj.Properties.Pipeline.Steps["make_files"].Outputs["files"]
	if !strings.HasPrefix(files, "azureml://datastores/workspaceblobstore/paths/azureml/scoring_make_files/files") {
		t.Errorf("make_files' output is handed on as %q", files)
	}
	if in := s.job("scoring_score").Properties.Inputs["files"]; in.URI != files || in.BlobPath == nil {
		t.Errorf("the parallel step reads %+v, want %s", in, files)
	}
	if scores := pj.Properties.Pipeline.Steps["score"].Outputs["scores"]; !strings.HasPrefix(scores, api.BlobURIScheme) {
		t.Errorf("the parallel step's output is handed on as %q", scores)
	}
	score := s.job("scoring_score")
	if score.Properties.ParentJobName != "scoring" || len(score.Properties.Attempts) != 1 || len(score.Properties.Attempts[0].Nodes) != 2 {
		t.Fatalf("the parallel step ran on %+v", score.Properties.Attempts)
	}
	st := score.Properties.Parallel
	if st == nil || st.MiniBatches != 8 || st.Items != 40 || st.Done != 7 || st.Failed != 1 || st.Retried != 2 || st.FailedItems != 5 {
		t.Fatalf("the parallel step's progress: %+v", st)
	}
	if f := st.Failures; len(f) != 1 || f[0].Tries != 3 || !strings.Contains(strings.Join(f[0].Items, " "), "item_13.txt") || !strings.Contains(f[0].Error, "cannot score item_13.txt") {
		t.Fatalf("the failed mini-batch's summary: %+v", st.Failures)
	}
	// Both nodes and 2 workers on each scored items.
	log := s.jobLog("scoring_score")
	if n := strings.Count(log, "init in pid"); n < 2 {
		t.Errorf("rank 0 started %d workers, want 2:\n%s", n, log)
	}

	// The pipeline's steps, its rows and the last step's output.
	out, errOut, code = s.cli(dir, "job", "list", "--parent", "scoring", "-o", "json")
	if code != 0 || !strings.Contains(out, "scoring_make_files") || !strings.Contains(out, "scoring_count") {
		t.Fatalf("job list --parent: %d %s %s", code, out, errOut)
	}
	out, _, code = s.cli(dir, "job", "show", "-n", "scoring", "-o", "table")
	if code != 0 || !strings.Contains(out, "score") || !strings.Contains(out, "Completed") {
		t.Fatalf("job show of the pipeline: %s", out)
	}
	out, _, _ = s.cli(dir, "job", "show", "-n", "scoring_score", "-o", "table")
	if !strings.Contains(out, "Mini-batches: 7 of 8 done, 1 failed") || !strings.Contains(out, "item_13.txt") {
		t.Errorf("job show of the parallel step:\n%s", out)
	}
	if _, errOut, code := s.cli(dir, "job", "download", "-n", "scoring_score", "--output-name", "scores"); code != 0 {
		t.Fatalf("download the rows: %s", errOut)
	}
	rows, err := os.ReadFile(filepath.Join(dir, "artifacts", "scores", "parallel_run_step.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(rows)), "\n")
	nodes := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "scored" {
			t.Fatalf("row %q", l)
		}
		nodes[f[3]] = true
	}
	if len(lines) != 35 || len(nodes) != 2 {
		t.Errorf("%d rows from %d nodes, want 35 from 2", len(lines), len(nodes))
	}
	// The parallel step's output, rows file included, is at its datastore
	// path for any later job to read.
	write(t, filepath.Join(dir, "recount.yml"), `type: command
name: recount
command: wc -l < ${{inputs.scores}}/parallel_run_step.txt
compute: azureml:cpu-cluster
inputs:
  scores:
    type: uri_folder
    path: azureml://datastores/workspaceblobstore/paths/azureml/scoring_score/scores/
`)
	if out, errOut, code := s.cli(dir, "job", "create", "--file", "recount.yml", "--stream"); code != 0 || !strings.Contains(out, "35") {
		t.Errorf("a job reading the step's output at its datastore path: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := s.cli(dir, "job", "download", "-n", "scoring_count", "--output-name", "summary"); code != 0 {
		t.Fatalf("download the count: %s", errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "artifacts", "summary", "count.txt")); err != nil || string(b) != "35\n" {
		t.Errorf("count.txt = %q, %v", b, err)
	}
}

// agentOf is the pid of the agent process of a node.
func agentOf(t *testing.T, dataDir, node string) int {
	t.Helper()
	for _, pid := range agents(dataDir) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if strings.Contains(string(b), node) {
			return pid
		}
	}
	t.Fatalf("no agent process of node %s", node)
	return 0
}

// rowsOf downloads a parallel step's rows and counts them by node; it
// fails on a row seen twice.
func (s *server) rowsOf(dir, job string) (total int, byNode map[string]int) {
	s.t.Helper()
	out := filepath.Join(dir, job)
	if _, errOut, code := s.cli(dir, "job", "download", "-n", job, "--output-name", "scores", "--download-path", out); code != 0 {
		s.t.Fatalf("download the rows: %s", errOut)
	}
	b, err := os.ReadFile(filepath.Join(out, "artifacts", "scores", "parallel_run_step.txt"))
	if err != nil {
		s.t.Fatal(err)
	}
	seen, byNode := map[string]bool{}, map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || seen[f[1]] {
			s.t.Fatalf("row %q (a second row of an item, or not a score)", l)
		}
		seen[f[1]] = true
		byNode[f[3]]++
	}
	return len(seen), byNode
}

// A node of a parallel step killed mid-step costs the step only the
// mini-batches it had in flight: the other node carries on in the same
// attempt, those mini-batches run again there, the rows the lost node
// had already returned are kept, and no item is scored twice.
func TestParallelStepLosesOnlyTheKilledNodesMiniBatches(t *testing.T) {
	localProcesses(t)
	// A process per node, so that one node dies and the other lives (a
	// compute's node host is one process for both).
	s := startServer(t, "--heartbeat-timeout", "4s", "--poll-timeout", "1s", "--node-host=false")
	s.createCompute("cpu-cluster", 0, 2, "PT60S")
	dir := t.TempDir()
	writeScoringPipeline(t, dir, "killnode", 0, 0.4, "") // 2s a mini-batch
	if _, errOut, code := s.cli(dir, "environment", "create", "--name", "scoring-env", "--image", "python:3.11-slim"); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := s.cli(dir, "job", "create", "--file", "pipeline.yml"); code != 0 {
		t.Fatal(errOut)
	}
	var victim string
	var doneBefore int
	waitFor(t, "the parallel step's rank 1 to score two mini-batches, with more running", 3*time.Minute, func() bool {
		j, err := s.c.GetJob(bctx, "killnode_score")
		if err != nil || len(j.Properties.Attempts) == 0 || j.Properties.Parallel == nil {
			return false
		}
		st := j.Properties.Parallel
		victim, doneBefore = j.Properties.Attempts[0].Nodes[1], st.Done
		return strings.Count(s.rankLog("killnode_score", 1), "scored 5 items") >= 2 && st.Running >= 2
	})
	if err := syscall.Kill(agentOf(t, s.dataDir, victim), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pipeline to end", 3*time.Minute, func() bool { return api.JobTerminal(s.job("killnode").Properties.Status) })
	if p := s.job("killnode").Properties; p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s: %s", p.Status, p.StatusMessage)
	}
	score := s.job("killnode_score")
	p := score.Properties
	if len(p.Attempts) != 1 {
		t.Fatalf("the step ran %d attempts; a lost node must not restart it: %+v", len(p.Attempts), p.Attempts)
	}
	st := p.Parallel
	// item_13's mini-batch retried twice; each of the others ran again
	// only if it was in flight on the lost node: at most its two workers'
	// and the two it had asked for ahead.
	lost := st.Retried - 2
	if st.Done != 7 || st.Failed != 1 || lost < 1 || lost > 4 {
		t.Fatalf("progress after losing node %s: %+v (mini-batches run again for the loss: %d)", victim, st, lost)
	}
	total, byNode := s.rowsOf(dir, "killnode_score")
	if total != 35 || byNode[victim] == 0 || byNode[victim] > doneBefore*5 {
		t.Fatalf("%d rows, %v by node: the lost node %s's finished rows (%d mini-batches were done before) must be kept", total, byNode, victim, doneBefore)
	}
	t.Logf("node %s lost after %d mini-batches done; %d ran again; rows by node %v", victim, doneBefore, lost, byNode)
}

// The control plane killed (kill -9) while a pipeline runs, twice: during
// its first step and during its parallel step. Started again, it resumes
// the pipeline where it was: no step runs twice (each has one attempt, the
// first step wrote its files once), the parallel step keeps the
// mini-batches done before, and the pipeline completes with 35 rows.
func TestPipelineResumesAfterControlPlaneKill(t *testing.T) {
	localProcesses(t)
	s := startServer(t)
	s.createCompute("cpu-cluster", 0, 2, "PT120S")
	dir := t.TempDir()
	writeScoringPipeline(t, dir, "resume", 3, 0.3, "")
	if _, errOut, code := s.cli(dir, "environment", "create", "--name", "scoring-env", "--image", "python:3.11-slim"); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := s.cli(dir, "job", "create", "--file", "pipeline.yml"); code != 0 {
		t.Fatal(errOut)
	}
	waitFor(t, "the first step running", 2*time.Minute, func() bool {
		j, err := s.c.GetJob(bctx, "resume_make_files")
		return err == nil && j.Properties.Status == api.JobRunning
	})
	s.kill9()
	s.start()
	var doneBefore int
	waitFor(t, "the parallel step under way", 3*time.Minute, func() bool {
		j, err := s.c.GetJob(bctx, "resume_score")
		if err != nil || j.Properties.Parallel == nil {
			return false
		}
		doneBefore = j.Properties.Parallel.Done
		return doneBefore >= 2
	})
	s.kill9()
	s.start()
	waitFor(t, "the pipeline to end", 3*time.Minute, func() bool { return api.JobTerminal(s.job("resume").Properties.Status) })
	if p := s.job("resume").Properties; p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s: %s", p.Status, p.StatusMessage)
	}
	for _, step := range []string{"make_files", "score", "count"} {
		if j := s.job("resume_" + step); len(j.Properties.Attempts) != 1 {
			t.Errorf("step %s ran %d times: %+v", step, len(j.Properties.Attempts), j.Properties.Attempts)
		}
	}
	if n := strings.Count(s.jobLog("resume_make_files"), "wrote 40 files"); n != 1 {
		t.Errorf("the first step wrote its files %d times", n)
	}
	st := s.job("resume_score").Properties.Parallel
	if st.Done != 7 || st.Failed != 1 || st.Retried != 2 {
		t.Errorf("the parallel step after the restarts: %+v (done before the second kill: %d)", st, doneBefore)
	}
	if total, _ := s.rowsOf(dir, "resume_score"); total != 35 {
		t.Errorf("%d rows, want 35", total)
	}
	list, err := s.c.ListTrials(bctx, "resume")
	if err != nil || len(list) != 3 {
		t.Fatalf("the pipeline's steps' jobs: %d, %v", len(list), err)
	}
}

// A parallel step over a table: an MLTable folder of a CSV split by
// partition_keys (each store and brand one mini-batch, which run() gets as
// a DataFrame with its partition's keys in mini_batch_context), and the
// CSV itself (a uri_file input) split by size (rows of about
// mini_batch_size bytes); the DataFrames run() returns are appended as
// rows, into the file a uri_file output names.
func TestParallelStepOverATable(t *testing.T) {
	if out, err := exec.Command("/usr/bin/python3", "-c", "import pandas").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("/usr/bin/python3 cannot import pandas (scripts/test-setup.sh installs python3-pandas): %v\n%s", err, out)
		}
		t.Skipf("/usr/bin/python3 cannot import pandas: %v", err)
	}
	t.Setenv("PATH", "/usr/bin:"+os.Getenv("PATH")) // the nodes' python3 is Debian's, with pandas
	localProcesses(t)
	s := startServer(t)
	s.createCompute("cpu-cluster", 0, 2, "PT60S")
	dir := t.TempDir()
	var csv strings.Builder
	csv.WriteString("store,brand,qty\n")
	for i := range 30 {
		fmt.Fprintf(&csv, "s%d,b%d,%d\n", i%3, i%2, i)
	}
	write(t, filepath.Join(dir, "sales", "sales.csv"), csv.String())
	write(t, filepath.Join(dir, "sales", "MLTable"), "paths:\n  - file: ./sales.csv\ntransformations:\n  - read_delimited:\n      delimiter: \",\"\n      encoding: utf8\n      header: all_files_same_headers\n")
	write(t, filepath.Join(dir, "src", "by_key.py"), `import pandas as pd

def init():
    pass

def run(df, mini_batch_context):
    keys = mini_batch_context.partition_key_value
    return pd.DataFrame([[keys["store"], keys["brand"], int(df["qty"].sum()), len(df)]])
`)
	write(t, filepath.Join(dir, "src", "by_size.py"), `def init():
    pass

def run(df):
    return df.assign(double=df["qty"] * 2)
`)
	write(t, filepath.Join(dir, "pipeline.yml"), `type: pipeline
name: tables
settings:
  default_compute: azureml:cpu-cluster
inputs:
  sales:
    type: mltable
    path: ./sales
    mode: direct
jobs:
  by_key:
    type: parallel
    inputs:
      data: ${{parent.inputs.sales}}
    outputs:
      totals: {type: uri_folder}
    input_data: ${{inputs.data}}
    partition_keys: [store, brand]
    resources: {instance_count: 2}
    max_concurrency_per_instance: 1
    task:
      type: run_function
      code: ./src
      entry_script: by_key.py
      append_row_to: ${{outputs.totals}}
  by_size:
    type: parallel
    inputs:
      data:
        type: uri_file
        path: ./sales/sales.csv
    outputs:
      rows:
        type: uri_file
        path: azureml://datastores/workspaceblobstore/paths/tables/doubled.csv
    input_data: ${{inputs.data}}
    mini_batch_size: "100b"
    max_concurrency_per_instance: 2
    task:
      type: run_function
      code: ./src
      entry_script: by_size.py
      append_row_to: ${{outputs.rows}}
`)
	if out, errOut, code := s.cli(dir, "job", "create", "--file", "pipeline.yml", "--stream"); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	byKey := s.job("tables_by_key").Properties.Parallel
	if byKey.MiniBatches != 6 || byKey.Done != 6 {
		t.Fatalf("by key: %+v\n%s", byKey, s.jobLog("tables_by_key"))
	}
	if _, errOut, code := s.cli(dir, "job", "download", "-n", "tables_by_key", "--output-name", "totals"); code != 0 {
		t.Fatal(errOut)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "artifacts", "totals", "parallel_run_step.txt"))
	if got := string(b); got != "s0 b0 60 5\ns0 b1 75 5\ns1 b0 80 5\ns1 b1 65 5\ns2 b0 70 5\ns2 b1 85 5\n" {
		t.Fatalf("totals by store and brand:\n%s", got)
	}
	bySize := s.job("tables_by_size").Properties.Parallel
	if bySize.MiniBatches < 3 || bySize.Done != bySize.MiniBatches || bySize.Items != 30 {
		t.Fatalf("by size: %+v", bySize)
	}
	if _, errOut, code := s.cli(dir, "job", "download", "-n", "tables_by_size", "--output-name", "rows"); code != 0 {
		t.Fatal(errOut)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "artifacts", "rows", "doubled.csv"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 30 || lines[0] != "s0 b0 0 0" || lines[29] != "s2 b1 29 58" {
		t.Fatalf("%d rows: %q … %q", len(lines), lines[0], lines[len(lines)-1])
	}
}
