package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Utilization of nodes and jobs (a Cumulus extension): the samples agents
// send with their polls (dispatch.UsageRecorder), read as
//
//	GET …/workspaces/{ws}/computes/{name}/usageSamples?node=&since=&until=
//	GET …/workspaces/{ws}/jobs/{name}/usageSamples?since=&until=
//
// with the rights of reading the compute or the job. since and until are
// RFC 3339 times or durations before now (1h, 30m); a compute's samples
// default to the last hour, a job's to its whole run.
func (s *Server) usageRoutes() {
	r := &s.router
	r.handle("GET", ws+"/computes/{name}/usageSamples", s.computeUsage)
	r.handle("GET", ws+"/jobs/{name}/usageSamples", s.jobUsage)
}

// DefaultUsageWindow is how far back a compute's samples go when the
// request names no since.
const DefaultUsageWindow = time.Hour

func newUsageRecorder(cfg Config, d Deps) *dispatch.UsageRecorder {
	every := cfg.UsageInterval
	if every <= 0 {
		every = dispatch.DefaultUsageInterval
	}
	return &dispatch.UsageRecorder{DB: d.DB, Clock: d.Clock, Interval: every, Log: d.Log.With("component", "usage")}
}

// RunUsage writes the samples agents send to this server until ctx ends.
func (s *Server) RunUsage(ctx context.Context) { s.usage.Run(ctx) }

func (s *Server) computeUsage(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	since, until, err := timeRange(q, s.clock.Now(), s.clock.Now().Add(-DefaultUsageWindow))
	if err != nil {
		return err
	}
	rows, err := store.UsageSamples(r.Context(), s.db.Q(), store.UsageQuery{Compute: d.Value.ID, Node: q.Get("node"), Since: since, Until: until})
	if err != nil {
		return err
	}
	out := api.UsageSamples{Value: make([]api.UsageSample, 0, len(rows))}
	for _, row := range rows {
		var u agentapi.Usage
		if json.Unmarshal([]byte(row.Body), &u) != nil {
			continue
		}
		out.Value = append(out.Value, NodeUsage(row.Node, u))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) jobUsage(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	since, until, err := timeRange(r.URL.Query(), s.clock.Now(), time.Time{})
	if err != nil {
		return err
	}
	rows, err := store.UsageSamples(r.Context(), s.db.Q(), store.UsageQuery{Compute: j.Compute, Job: j.UID, Since: since, Until: until})
	if err != nil {
		return err
	}
	out := api.UsageSamples{Value: make([]api.UsageSample, 0, len(rows))}
	for _, row := range rows {
		var u agentapi.JobUsage
		if json.Unmarshal([]byte(row.Body), &u) != nil {
			continue
		}
		out.Value = append(out.Value, JobUsage(row.Node, row.Time, u))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// NodeUsage is a node's sample as the API shows it.
func NodeUsage(node string, u agentapi.Usage) api.UsageSample {
	return api.UsageSample{Time: u.Time.UTC(), Node: node,
		CPU:     api.UsageCPU{Utilization: u.CPU, CPUs: u.CPUs},
		Memory:  api.UsageMemory{UsedBytes: u.MemoryUsed, TotalBytes: u.MemoryTotal},
		GPUs:    gpuUsage(u.GPUs),
		Disk:    &api.UsageDisk{UsedBytes: u.DiskUsed, TotalBytes: u.DiskTotal},
		Network: &api.UsageNetwork{ReceivedBytes: u.NetworkReceived, SentBytes: u.NetworkSent}}
}

// JobUsage is a job's sample on one node as the API shows it.
func JobUsage(node string, at time.Time, u agentapi.JobUsage) api.UsageSample {
	return api.UsageSample{Time: at.UTC(), Node: node,
		CPU:    api.UsageCPU{Utilization: u.CPU, Seconds: u.CPUSeconds},
		Memory: api.UsageMemory{UsedBytes: u.MemoryUsed},
		GPUs:   gpuUsage(u.GPUs)}
}

func gpuUsage(gs []agentapi.GPUUsage) []api.UsageGPU {
	out := make([]api.UsageGPU, 0, len(gs))
	for _, g := range gs {
		out = append(out, api.UsageGPU{Index: g.Index, Utilization: g.Utilization, MemoryUsedBytes: g.MemoryUsed, MemoryTotalBytes: g.MemoryTotal})
	}
	return out
}
