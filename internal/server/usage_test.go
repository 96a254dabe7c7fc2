package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A node's poll carries its utilization; the compute's and the job's
// samples are then readable by whoever reads the compute or the job, and
// by no one else; a bad time is an ARM 400.
func TestUsageSamplesThroughPollAndREST(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.UsageInterval = 50 * time.Millisecond }})
	h.create("cpu", computeBody())
	h.do("PUT", hWSPath+"/jobs/train", map[string]any{"properties": map[string]any{"jobType": "Command", "command": "true",
		"computeId": computePath("cpu")}}).want(t, 201)
	ctx := context.Background()
	j, err := store.GetJob(ctx, h.db.Q(), store.Key(hWSPath), "train")
	if err != nil {
		t.Fatal(err)
	}
	// A node of the compute, running the job as an assignment leaves it.
	join, hash := dispatch.NewNodeJoinToken("n1")
	if err := store.PutNode(ctx, h.db.W(), store.Node{ID: "n1", Compute: computePath("cpu"), State: api.NodePreparing,
		VMSize: "Standard_DS3_v2", Provider: "test", JoinHash: hash, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var reg agentapi.RegisterResponse
	res := hardAgentPost(t, h.url, "/register", join, agentapi.RegisterRequest{NodeID: "n1", Address: "127.0.0.1"})
	if res.Status != http.StatusOK || json.Unmarshal(res.Body, &reg) != nil || reg.UsageInterval != 50*time.Millisecond {
		t.Fatalf("register: %d %s; want the usage interval handed to the agent", res.Status, res.Body)
	}
	tok := reg.NodeToken
	n, err := store.GetNode(ctx, h.db.Q(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	n.JobID = j.UID
	if err := store.PutNode(ctx, h.db.W(), n); err != nil {
		t.Fatal(err)
	}

	run, stop := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() { defer close(flushed); h.srv.RunUsage(run) }()
	gpu := 0.42
	at := time.Now().UTC().Truncate(time.Millisecond)
	res = hardAgentPost(t, h.url, "/poll", tok, agentapi.PollRequest{NodeID: "n1", Usage: &agentapi.Usage{
		Time: at, CPU: 0.75, CPUs: 4, MemoryUsed: 3 << 30, MemoryTotal: 8 << 30, DiskUsed: 10, DiskTotal: 100,
		NetworkReceived: 5, NetworkSent: 6, GPUs: []agentapi.GPUUsage{{Index: 0, Utilization: &gpu, MemoryUsed: 1 << 30}},
		Jobs: []agentapi.JobUsage{{UID: j.UID, Attempt: 1, CPU: 0.5, CPUSeconds: 12, MemoryUsed: 1 << 30,
			GPUs: []agentapi.GPUUsage{{Index: 0, Utilization: &gpu}}}}}})
	if res.Status != http.StatusOK {
		t.Fatalf("poll: %d %s", res.Status, res.Body)
	}
	stop() // the recorder writes what it holds as it stops
	<-flushed

	var got api.UsageSamples
	h.do("GET", computePath("cpu")+"/usageSamples", nil).want(t, 200).json(t, &got)
	if len(got.Value) != 1 {
		t.Fatalf("compute samples: %+v", got)
	}
	s := got.Value[0]
	if !s.Time.Equal(at) || s.Node != "n1" || s.CPU.Utilization != 0.75 || s.CPU.CPUs != 4 || s.Memory.UsedBytes != 3<<30 ||
		s.Memory.TotalBytes != 8<<30 || s.Disk == nil || s.Disk.TotalBytes != 100 || s.Network == nil || s.Network.SentBytes != 6 ||
		len(s.GPUs) != 1 || s.GPUs[0].Utilization == nil || *s.GPUs[0].Utilization != gpu {
		t.Errorf("compute sample = %+v", s)
	}
	h.do("GET", computePath("cpu")+"/usageSamples?node=n2", nil).want(t, 200).json(t, &got)
	if len(got.Value) != 0 {
		t.Errorf("samples of another node: %+v", got.Value)
	}
	h.do("GET", hWSPath+"/jobs/train/usageSamples", nil).want(t, 200).json(t, &got)
	if len(got.Value) != 1 || got.Value[0].CPU.Utilization != 0.5 || got.Value[0].CPU.Seconds != 12 || got.Value[0].Node != "n1" || got.Value[0].Disk != nil {
		t.Errorf("job samples = %+v", got.Value)
	}
	h.do("GET", hWSPath+"/jobs/train/usageSamples?until="+at.Add(-time.Second).Format(time.RFC3339Nano), nil).want(t, 200).json(t, &got)
	if len(got.Value) != 0 {
		t.Errorf("job samples before the first: %+v", got.Value)
	}

	for _, q := range []string{"since=yesterday", "until=-5m", "since=1m&until=2m"} {
		r := h.do("GET", computePath("cpu")+"/usageSamples?"+q, nil).want(t, 400, api.CodeBadRequest)
		checkErrorShape(t, q, r)
	}
	h.do("GET", computePath("nope")+"/usageSamples", nil).want(t, 404)

	stranger := h.user("sam", "", "")
	reader := h.user("rita", "Reader", hWSPath)
	h.as(stranger, "GET", computePath("cpu")+"/usageSamples", nil).want(t, 403, api.CodeForbidden)
	h.as(stranger, "GET", hWSPath+"/jobs/train/usageSamples", nil).want(t, 403, api.CodeForbidden)
	r := h.as(reader, "GET", computePath("cpu")+"/usageSamples?since=1h", nil).want(t, 200)
	if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Value) != 1 {
		t.Errorf("reader: %s, %v", r.Body, err)
	}
	h.as(reader, "GET", hWSPath+"/jobs/train/usageSamples", nil).want(t, 200)
}

// The utilization families, as a scraper sees them beside the others,
// pass promtool's checks.
func TestUsageMetricsPassPromtool(t *testing.T) {
	promtool := needPromtool(t)
	h := newHarness(t, harnessOpts{metrics: true})
	c := h.create("cpu1", computeBody())
	ctx := context.Background()
	if err := store.PutNode(ctx, h.db.W(), store.Node{ID: "n1", Compute: c.ID, State: api.NodeRunning, JobID: "u1"}); err != nil {
		t.Fatal(err)
	}
	util := 0.5
	gpus := agentapi.FormatGPUs([]agentapi.GPUUsage{{Index: 0, Utilization: &util, MemoryUsed: 1 << 30}})
	rows := []store.UsageRow{
		{Compute: store.Key(c.ID), Node: "n1", Time: time.Now(), Body: "{}", Latest: store.UsageValues{CPU: 0.5, MemoryUsed: 1, MemoryTotal: 2, GPUs: gpus}},
		{Compute: store.Key(c.ID), Node: "n1", Job: "u1", JobName: "train", Time: time.Now(), Body: "{}", Latest: store.UsageValues{CPU: 0.5, GPUs: gpus}},
	}
	if err := h.db.Tx(ctx, func(q store.Querier) error { return store.PutUsage(ctx, q, rows) }); err != nil {
		t.Fatal(err)
	}
	r := h.do("GET", "/metrics", nil).want(t, 200)
	fams := parse(t, r.Body)
	for _, name := range metrics.UsageMetricNames() {
		if fams[name] == nil {
			t.Errorf("no %s in the exposition", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(r.Body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
