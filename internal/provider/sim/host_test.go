package sim

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

// This test binary is its own node host: run with the argument "sim-host"
// it serves a provider's requests on its standard input and output.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sim-host" {
		if err := ServeHost(os.Stdin, os.Stdout, nil); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hosted is the host command of this test binary.
var hosted = []string{os.Args[0], "sim-host"}

// A node in the host process registers, takes an assignment and reports
// it as a node of the control plane's own process does.
func TestHostedNodeRunsAnAssignment(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t, time.Hour, hosted...)
	if _, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "n1", ServerURL: srv.URL, JoinToken: "join"}); err != nil {
		t.Fatal(err)
	}
	srv.Assign <- agentapi.Assignment{UID: "j1", Attempt: 1, Env: map[string]string{DurationEnv: "20ms"}}
	if ev := srv.Event(t); ev.UID != "j1" || ev.Phase != agentapi.PhaseRunning {
		t.Fatalf("first event %+v; want j1 running", ev)
	}
	if ev := srv.Event(t); ev.UID != "j1" || ev.Phase != agentapi.PhaseExited || ev.ExitCode != 0 {
		t.Fatalf("second event %+v; want j1 exited 0", ev)
	}
}

// When the host process dies its nodes show as not running (the cluster
// controller replaces them), and the next node starts a new host.
func TestNodesOfADeadHostAreNotRunning(t *testing.T) {
	srv := providertest.NewStubServer(t)
	p := newTestProvider(t, 0, hosted...)
	spec := func(id string) provider.NodeSpec {
		return provider.NodeSpec{NodeID: id, ServerURL: srv.URL, JoinToken: "join"}
	}
	if _, err := p.Create(context.Background(), spec("n1")); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	h := p.host
	p.mu.Unlock()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-h.gone
	if running(t, p)["n1"] {
		t.Fatal("a node of a killed host still shows as running")
	}
	if _, err := p.Create(context.Background(), spec("n2")); err != nil {
		t.Fatal(err)
	}
	if !running(t, p)["n2"] {
		t.Fatal("a node created after its host died does not show as running")
	}
	p.mu.Lock()
	again := p.host
	p.mu.Unlock()
	if again == nil || again == h {
		t.Fatal("no new host process was started for the next node")
	}
}

func running(t *testing.T, p *Provider) map[string]bool {
	t.Helper()
	in, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, i := range in {
		out[i.NodeID] = i.Running
	}
	return out
}
