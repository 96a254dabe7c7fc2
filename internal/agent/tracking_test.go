package agent

import (
	"slices"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// TestTrackingEnv: a job with a tracking token gets MLflow's variables,
// naming the replica the agent talks to and the job's run; one without
// gets none.
func TestTrackingEnv(t *testing.T) {
	c, err := newClient("https://cp1:8787/,https://cp2:8787", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{cfg: Config{CAFile: "/etc/cumulus/ca.pem"}, c: c}
	asg := agentapi.Assignment{Name: "train-1", Env: map[string]string{agentapi.TrackingTokenEnv: "cmlf_u.t", "AZUREML_EXPERIMENT_NAME": "exp"}}
	got := a.trackingEnv(asg)
	want := []string{"MLFLOW_TRACKING_URI=https://cp1:8787/mlflow", "MLFLOW_RUN_ID=train-1", "MLFLOW_EXPERIMENT_NAME=exp",
		"MLFLOW_TRACKING_SERVER_CERT_PATH=/etc/cumulus/ca.pem"}
	if !slices.Equal(got, want) {
		t.Errorf("trackingEnv =\n%q\nwant\n%q", got, want)
	}
	if got := a.trackingEnv(agentapi.Assignment{Name: "x"}); got != nil {
		t.Errorf("without a token: %q", got)
	}
}
