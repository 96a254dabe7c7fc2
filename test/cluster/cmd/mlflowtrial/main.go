// Command mlflowtrial is a sweep trial for the cluster tests: it logs a
// known function of its parameters as a metric each step, sending the
// requests the MLflow Python client sends for
//
//	mlflow.start_run()  # resumes $MLFLOW_RUN_ID: runs/get, runs/update
//	mlflow.log_param("x", x)  # runs/log-parameter
//	mlflow.log_metric("score", v, step=k)  # runs/log-metric
//	mlflow.end_run()  # runs/update FINISHED
//
// (the mlflow package itself is not installable where the tests run). Its
// progress is kept in $CUMULUS_CHECKPOINT_DIR, so a preempted trial
// resumes at the step it reached.
//
//	mlflowtrial -x 0.3 -y -0.2 -steps 5 -sleep 200ms [-fn peak|product]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	x := flag.Float64("x", 0, "parameter x")
	y := flag.Float64("y", 0, "parameter y")
	steps := flag.Int("steps", 5, "steps to log")
	sleep := flag.Duration("sleep", 200*time.Millisecond, "time per step")
	metric := flag.String("metric", "score", "metric name")
	flag.Parse()
	if err := run(*x, *y, *steps, *sleep, *metric); err != nil {
		fmt.Fprintln(os.Stderr, "mlflowtrial:", err)
		os.Exit(1)
	}
}

// Score is the trial's final metric: largest (1) at x=0.3, y=-0.2. Step
// k of n logs Score·(k+1)/n, so trials are ranked alike at every step.
func Score(x, y float64) float64 {
	return math.Exp(-((x-0.3)*(x-0.3) + (y+0.2)*(y+0.2)) / 0.5)
}

func run(x, y float64, steps int, sleep time.Duration, metric string) error {
	uri, tok, run := os.Getenv("MLFLOW_TRACKING_URI"), os.Getenv("MLFLOW_TRACKING_TOKEN"), os.Getenv("MLFLOW_RUN_ID")
	if uri == "" || tok == "" || run == "" {
		return fmt.Errorf("MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN and MLFLOW_RUN_ID must be set")
	}
	call := func(method, op string, body any) (map[string]any, error) {
		var rd io.Reader
		u := uri + "/api/2.0/mlflow/" + op
		if method == http.MethodGet {
			u += "?run_uuid=" + run + "&run_id=" + run
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		if res.StatusCode != 200 {
			return nil, fmt.Errorf("%s %s: %d %v", method, op, res.StatusCode, out)
		}
		return out, nil
	}
	if _, err := call(http.MethodGet, "runs/get", nil); err != nil {
		return err
	}
	if _, err := call(http.MethodPost, "runs/update", map[string]any{"run_id": run, "run_uuid": run, "status": "RUNNING"}); err != nil {
		return err
	}
	for k, v := range map[string]float64{"x": x, "y": y} {
		if _, err := call(http.MethodPost, "runs/log-parameter", map[string]any{"run_id": run, "run_uuid": run, "key": k, "value": strconv.FormatFloat(v, 'g', -1, 64)}); err != nil {
			return err
		}
	}
	ckpt := filepath.Join(os.Getenv("CUMULUS_CHECKPOINT_DIR"), "step")
	start := 0
	if b, err := os.ReadFile(ckpt); err == nil {
		start, _ = strconv.Atoi(string(b))
		fmt.Printf("resumed at step %d\n", start)
	}
	score := Score(x, y)
	for k := start; k < steps; k++ {
		v := score * float64(k+1) / float64(steps)
		if _, err := call(http.MethodPost, "runs/log-metric", map[string]any{"run_id": run, "run_uuid": run, "key": metric, "value": v,
			"timestamp": time.Now().UnixMilli(), "step": k}); err != nil {
			return err
		}
		fmt.Printf("step %d %s=%g\n", k, metric, v)
		// Written aside and renamed, as a training script saves its
		// checkpoints: the node may take the folder at any moment (a
		// preemption), and a file caught truncated would resume at 0.
		if err := os.WriteFile(ckpt+".tmp", []byte(strconv.Itoa(k+1)), 0o644); err != nil {
			return err
		}
		if err := os.Rename(ckpt+".tmp", ckpt); err != nil {
			return err
		}
		time.Sleep(sleep)
	}
	_, err := call(http.MethodPost, "runs/update", map[string]any{"run_id": run, "run_uuid": run, "status": "FINISHED", "end_time": time.Now().UnixMilli()})
	return err
}
