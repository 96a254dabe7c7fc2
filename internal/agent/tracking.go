package agent

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// trackingEnv is what MLflow reads to log to the job's run on the control
// plane, as Azure ML sets it in its jobs: the tracking URI (the replica
// this agent talks to now), the run id (the job's name), the experiment,
// and the CA that signed the server's certificate, copied into the job's
// folder dir (which a job container mounts at the same path). The token
// comes in the assignment; without one (a server that issues none)
// nothing is set.
func (a *agent) trackingEnv(asg agentapi.Assignment, dir string) []string {
	if asg.Env[agentapi.TrackingTokenEnv] == "" || a.c == nil {
		return nil
	}
	base := strings.TrimRight(a.c.servers.Current(), "/")
	env := []string{
		"MLFLOW_TRACKING_URI=" + base + agentapi.TrackingPath,
		"MLFLOW_RUN_ID=" + asg.Name,
	}
	if exp := asg.Env["AZUREML_EXPERIMENT_NAME"]; exp != "" {
		env = append(env, "MLFLOW_EXPERIMENT_NAME="+exp)
	}
	if ca := a.cfg.CAFile; ca != "" && strings.HasPrefix(base, "https:") {
		if pem, err := os.ReadFile(ca); err == nil {
			copied := filepath.Join(dir, trackingCAFile)
			if err := os.WriteFile(copied, pem, 0o644); err == nil {
				env = append(env, "MLFLOW_TRACKING_SERVER_CERT_PATH="+copied)
			}
		}
	}
	return env
}

// trackingCAFile is the name of the server's CA in a job's folder.
const trackingCAFile = ".cumulus-ca.pem"
