package sim

import (
	"context"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

func newTestProvider(t *testing.T, d time.Duration) *Provider {
	p, err := New(Options{JobDuration: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformance(t *testing.T) {
	srv := providertest.NewStubServer(t)
	providertest.Run(t,
		func(t *testing.T) provider.Provider { return newTestProvider(t, 0) },
		func(id string) provider.NodeSpec {
			return provider.NodeSpec{NodeID: id, VCPUs: 2, MemoryGB: 4, ServerURL: srv.URL, JoinToken: "join"}
		})
}

func TestRunsAssignmentForItsDuration(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t, time.Hour)
	if _, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "n1", ServerURL: srv.URL, JoinToken: "join"}); err != nil {
		t.Fatal(err)
	}
	srv.Assign <- agentapi.Assignment{UID: "j1", Attempt: 1, Env: map[string]string{DurationEnv: "50ms"}}
	if ev := srv.Event(t); ev.UID != "j1" || ev.Phase != agentapi.PhaseRunning {
		t.Fatalf("first event %+v; want j1 running", ev)
	}
	ev := srv.Event(t)
	if ev.UID != "j1" || ev.Phase != agentapi.PhaseExited || ev.ExitCode != 0 {
		t.Fatalf("second event %+v; want j1 exited 0", ev)
	}
	if d := ev.Ended.Sub(ev.Started); d < 50*time.Millisecond {
		t.Errorf("the job ran %s; want at least 50ms", d)
	}
}
