package agent

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// BenchmarkJobOnNode: jobs of `true` one after the other on one node,
// its agent in this process against a stand-in control plane (the
// protocol's fake server): what the agent itself does and allocates per
// job (the job's init and shell are processes of their own and do not
// count in the allocations). As root the jobs run as a job user,
// isolated, as on a local node.
//
//	go test ./internal/agent/ -run '^$' -bench JobOnNode -benchtime 200x -benchmem
func BenchmarkJobOnNode(b *testing.B) {
	f := newFakeServer(b)
	startAgent(b, f, func(c *Config) {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
		if os.Geteuid() == 0 {
			c.JobUser = "2000999003"
		}
	})
	run := func(i int) {
		uid := fmt.Sprintf("j%d", i)
		f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: uid, Name: uid, Attempt: 1, Grace: time.Second, Owner: "bench", Command: "true"}})
		if ev := f.exited(uid, time.Minute); ev.ExitCode != 0 {
			b.Fatalf("%s exited %+v", uid, ev)
		}
	}
	run(-1) // the first job makes what later ones reuse
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(i)
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "agent-B/job")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "agent-allocs/job")
}
