package api

import "time"

// JobMetrics is what a job logged the MLflow way (GET …/jobs/{name}/metrics,
// a Cumulus extension): each metric's latest value, every value of the
// metrics asked for, and the run's params and tags.
type JobMetrics struct {
	Latest  []MetricValue            `json:"latest"`
	History map[string][]MetricValue `json:"history,omitempty"`
	Params  map[string]string        `json:"params,omitempty"`
	Tags    map[string]string        `json:"tags,omitempty"`
}

// MetricValue is one logged value of a metric.
type MetricValue struct {
	Name      string    `json:"name"`
	Value     float64   `json:"value"`
	Step      int64     `json:"step"`
	Timestamp time.Time `json:"timestamp"`
}
