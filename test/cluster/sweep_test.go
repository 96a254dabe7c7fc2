package cluster

import (
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// buildTrial builds the trial program (cmd/mlflowtrial), which logs a
// known function of its parameters through MLflow's REST API.
func buildTrial(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mlflowtrial")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mlflowtrial")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mlflowtrial: %v\n%s", err, out)
	}
	return bin
}

// score is mlflowtrial's function: largest (1) at x=0.3, y=-0.2.
func score(x, y float64) float64 { return math.Exp(-((x-0.3)*(x-0.3) + (y+0.2)*(y+0.2)) / 0.5) }

func sweepJob(name, compute, command string, space map[string]any, alg string, total, concurrent int32) api.Job {
	seed := int64(12)
	return api.Job{Name: name, Properties: api.JobProperties{JobType: api.JobTypeSweep, ComputeID: compute,
		Trial:             &api.TrialComponent{Command: command},
		SearchSpace:       space,
		SamplingAlgorithm: &api.SamplingAlgorithm{SamplingAlgorithmType: alg, Seed: &seed},
		Objective:         &api.Objective{Goal: "Maximize", PrimaryMetric: "score"},
		Limits:            &api.JobLimits{MaxTotalTrials: total, MaxConcurrentTrials: concurrent},
	}}
}

// runSweep waits for a sweep to end, sampling the cluster's node count;
// it returns the sweep, its trials and the most nodes seen at once.
func (s *server) runSweep(name, compute string, timeout time.Duration) (api.Job, []api.Job, int) {
	s.t.Helper()
	most := 0
	waitFor(s.t, "sweep "+name+" to end", timeout, func() bool {
		if nodes, err := s.c.ListNodes(bctx, compute); err == nil {
			most = max(most, len(nodes))
		}
		return api.JobTerminal(s.job(name).Properties.Status)
	})
	sw := s.job(name)
	trials, err := s.c.ListTrials(bctx, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return sw, trials, most
}

// A sweep of 12 trials, 3 at a time on a cluster of at most 3 nodes: the
// cluster grows to 3 and no further, every trial logs its metric through
// MLflow's API, grid, random and Bayesian sampling each name the trial of
// the best score as the best (grid: the optimum), and the cluster shrinks
// after.
func TestSweepGridAndRandom(t *testing.T) {
	trial := buildTrial(t)
	s := startServer(t)
	s.createCompute("cpu", 0, 3, "PT2S")
	cmd := trial + " -x ${{search_space.x}} -y ${{search_space.y}} -steps 4 -sleep 150ms"
	grid := map[string]any{"x": []any{"choice", []any{[]any{-0.5, 0.0, 0.3, 0.6}}}, "y": []any{"choice", []any{[]any{-0.6, -0.2, 0.4}}}}
	random := map[string]any{"x": []any{"uniform", []any{-1.0, 1.0}}, "y": []any{"uniform", []any{-1.0, 1.0}}}
	for _, c := range []struct {
		alg   string
		space map[string]any
	}{{"Grid", grid}, {"Random", random}, {"Bayesian", random}} {
		name := "sweep-" + strings.ToLower(c.alg)
		s.submitJob(sweepJob(name, "cpu", cmd, c.space, c.alg, 12, 3))
		sw, trials, most := s.runSweep(name, "cpu", 3*time.Minute)
		p := sw.Properties
		if p.Status != api.JobCompleted || len(trials) != 12 || p.Sweep.TrialsCreated != 12 {
			t.Fatalf("%s: sweep %s (%s), %d trials", c.alg, p.Status, p.StatusMessage, len(trials))
		}
		if most != 3 {
			t.Errorf("%s: the cluster had at most %d nodes, want 3 (max_concurrent_trials and maxNodeCount)", c.alg, most)
		}
		var want api.Job
		for _, tr := range trials {
			if tr.Properties.Status != api.JobCompleted {
				t.Fatalf("%s: trial %s %s: %s", c.alg, tr.Name, tr.Properties.Status, s.jobLog(tr.Name))
			}
			x, y := tr.Properties.Parameters["x"].(float64), tr.Properties.Parameters["y"].(float64)
			if got := tr.Properties.Metrics["score"]; math.Abs(got-score(x, y)) > 1e-9 {
				t.Errorf("%s: trial %s logged score %v, want %v", c.alg, tr.Name, got, score(x, y))
			}
			if want.Name == "" || score(x, y) > want.Properties.Metrics["score"] {
				want = tr
			}
		}
		b := p.Sweep.BestTrial
		if b == nil || b.Name != want.Name || p.Properties["best_child_run_id"] != want.Name {
			t.Fatalf("%s: best trial %+v, want %s", c.alg, b, want.Name)
		}
		if c.alg == "Grid" && (b.Parameters["x"] != 0.3 || b.Parameters["y"] != -0.2 || b.Value != 1) {
			t.Errorf("grid's best: %+v, want x=0.3 y=-0.2 score 1", b)
		}
		t.Logf("%s: best trial %s %v score %.4f; the cluster peaked at %d nodes", c.alg, b.Name, b.Parameters, b.Value, most)
	}
	waitFor(t, "the cluster to shrink to 0", 60*time.Second, func() bool {
		nodes, err := s.c.ListNodes(bctx, "cpu")
		return err == nil && len(nodes) == 0
	})
}

// Bandit termination cancels the trials that fall behind the best, while
// they run; the others complete.
func TestSweepBanditStopsLaggards(t *testing.T) {
	trial := buildTrial(t)
	s := startServer(t)
	s.createCompute("cpu", 0, 3, "PT30S")
	cmd := trial + " -x ${{search_space.x}} -y -0.2 -steps 40 -sleep 250ms"
	space := map[string]any{"x": []any{"choice", []any{[]any{0.3, -1.5, 0.25}}}}
	j := sweepJob("bandit", "cpu", cmd, space, "Grid", 3, 3)
	slack := 0.2
	j.Properties.EarlyTermination = &api.EarlyTerminationPolicy{PolicyType: "Bandit", SlackFactor: &slack, EvaluationInterval: 1, DelayEvaluation: 2}
	s.submitJob(j)
	sw, trials, _ := s.runSweep("bandit", "cpu", 3*time.Minute)
	p := sw.Properties
	if p.Status != api.JobCompleted || len(trials) != 3 {
		t.Fatalf("sweep %s (%s), %d trials", p.Status, p.StatusMessage, len(trials))
	}
	// x=-1.5 scores 0.056 of the best's 1: far behind at every step.
	if trials[1].Properties.Status != api.JobCanceled || !strings.Contains(trials[1].Properties.StatusMessage+historyReasons(trials[1]), "stopped early") {
		t.Errorf("the laggard: %s (%s)", trials[1].Properties.Status, trials[1].Properties.StatusMessage)
	}
	if trials[0].Properties.Status != api.JobCompleted || trials[2].Properties.Status != api.JobCompleted {
		t.Errorf("the leaders: %s, %s", trials[0].Properties.Status, trials[2].Properties.Status)
	}
	if len(p.Sweep.StoppedEarly) != 1 || p.Sweep.StoppedEarly[0] != "bandit_1" || p.Sweep.BestTrial.Name != "bandit_0" {
		t.Errorf("sweep status: %+v", p.Sweep)
	}
}

func historyReasons(j api.Job) string {
	var b strings.Builder
	for _, h := range j.Properties.History {
		b.WriteString(h.Reason + ";")
	}
	return b.String()
}

// A trial preempted on a low-priority cluster is queued again and resumes
// from its checkpoint as the same trial: the sweep creates no new one.
func TestSweepTrialPreemptedResumes(t *testing.T) {
	trial := buildTrial(t)
	s := startServer(t)
	s.createLowPriority("spot", 1, "PT2S")
	cmd := trial + " -x ${{search_space.x}} -y -0.2 -steps 12 -sleep 300ms"
	s.submitJob(sweepJob("spotsweep", "spot", cmd, map[string]any{"x": []any{"choice", []any{[]any{0.3, 0.0}}}}, "Grid", 2, 1))
	waitFor(t, "trial 0 to log a few steps", 60*time.Second, func() bool {
		j, err := s.c.GetJob(bctx, "spotsweep_0")
		return err == nil && strings.Contains(s.jobLog("spotsweep_0"), "step 3 ") && j.Properties.Status == api.JobRunning
	})
	if err := s.c.SimulateEviction(bctx, "spot", s.nodeOf("spotsweep_0", 0)); err != nil {
		t.Fatal(err)
	}
	sw, trials, _ := s.runSweep("spotsweep", "spot", 3*time.Minute)
	if sw.Properties.Status != api.JobCompleted || sw.Properties.Sweep.TrialsCreated != 2 || len(trials) != 2 {
		t.Fatalf("sweep %s (%s), %d trials created", sw.Properties.Status, sw.Properties.StatusMessage, sw.Properties.Sweep.TrialsCreated)
	}
	t0 := trials[0]
	if t0.Properties.Status != api.JobCompleted || len(t0.Properties.Attempts) != 2 {
		t.Fatalf("trial 0: %s, %d attempts", t0.Properties.Status, len(t0.Properties.Attempts))
	}
	if log := s.jobLog("spotsweep_0"); !strings.Contains(log, "resumed at step") || strings.Contains(log, "step 0 ") {
		t.Errorf("trial 0's second attempt did not resume from its checkpoint:\n%s", log)
	}
	if sw.Properties.Sweep.BestTrial.Name != "spotsweep_0" || t0.Properties.Metrics["score"] != 1 {
		t.Errorf("best %+v, trial 0's score %v", sw.Properties.Sweep.BestTrial, t0.Properties.Metrics["score"])
	}
}
