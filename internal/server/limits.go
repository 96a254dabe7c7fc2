package server

// Limits bound what the callers of a workspace and its jobs can make the
// control plane keep, so that one workspace cannot fill the disk or the
// database of all. What a job writes through MLflow is bounded per job
// (store.MaxMetricValues, store.MaxParams, store.MaxTags; values by the
// MLflow API's own limits) and per workspace (WorkspaceRunData); a log per
// attempt and rank (JobLog); blobs per upload (Config.MaxBlobSize) and per
// workspace (WorkspaceBlobs). A refusal is MLflow's RESOURCE_LIMIT_EXCEEDED
// on the MLflow routes and an ARM error elsewhere.
type Limits struct {
	// WorkspaceRunData bounds the bytes of params, tags and metric values
	// that the jobs of one workspace keep together.
	WorkspaceRunData int64
	// WorkspaceBlobs bounds the bytes of the blobs one workspace owns.
	WorkspaceBlobs int64
	// JobLog bounds the log of one rank of one attempt of a job: the rest
	// is dropped, and the log says so.
	JobLog int64
}

// Limit defaults.
const (
	DefaultWorkspaceRunData int64 = 1 << 30
	DefaultWorkspaceBlobs   int64 = 100 << 30
	DefaultJobLog           int64 = 1 << 30
)

func (l Limits) withDefaults() Limits {
	if l.WorkspaceRunData <= 0 {
		l.WorkspaceRunData = DefaultWorkspaceRunData
	}
	if l.WorkspaceBlobs <= 0 {
		l.WorkspaceBlobs = DefaultWorkspaceBlobs
	}
	if l.JobLog <= 0 {
		l.JobLog = DefaultJobLog
	}
	return l
}
