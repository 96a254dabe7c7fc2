package agentapi

// TrackingTokenEnv is the variable of an assignment's environment that
// holds the job's MLflow bearer token; the agent adds the rest of MLflow's
// variables (tracking URI, run id, CA).
const TrackingTokenEnv = "MLFLOW_TRACKING_TOKEN"

// TrackingPath is the path under the control plane's URL that MLflow's
// tracking URI names: MLflow appends /api/2.0/mlflow/… to it.
const TrackingPath = "/mlflow"
