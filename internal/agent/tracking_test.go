package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// TestTrackingEnv: a job with a tracking token gets MLflow's variables,
// naming the replica the agent talks to, the job's run and a copy of the
// server's CA in its folder; one without gets none.
func TestTrackingEnv(t *testing.T) {
	c, err := newClient("https://cp1:8787/,https://cp2:8787", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, dir := filepath.Join(t.TempDir(), "ca.pem"), t.TempDir()
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &agent{cfg: Config{CAFile: ca}, c: c}
	asg := agentapi.Assignment{Name: "train-1", Env: map[string]string{agentapi.TrackingTokenEnv: "cmlf_u.t", "AZUREML_EXPERIMENT_NAME": "exp"}}
	got := a.trackingEnv(asg, dir)
	copied := filepath.Join(dir, trackingCAFile)
	want := []string{"MLFLOW_TRACKING_URI=https://cp1:8787/mlflow", "MLFLOW_RUN_ID=train-1", "MLFLOW_EXPERIMENT_NAME=exp",
		"MLFLOW_TRACKING_SERVER_CERT_PATH=" + copied}
	if !slices.Equal(got, want) {
		t.Errorf("trackingEnv =\n%q\nwant\n%q", got, want)
	}
	if b, err := os.ReadFile(copied); err != nil || string(b) != "PEM" {
		t.Errorf("the CA in the job's folder: %q %v", b, err)
	}
	if got := a.trackingEnv(agentapi.Assignment{Name: "x"}, dir); got != nil {
		t.Errorf("without a token: %q", got)
	}
}
