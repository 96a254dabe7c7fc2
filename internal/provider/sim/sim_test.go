package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

// stubServer accepts registrations, holds polls briefly, hands out the
// assignments queued in assign and records job events.
type stubServer struct {
	*httptest.Server
	assign chan agentapi.Assignment
	events chan agentapi.JobEvent
}

func newStubServer(t *testing.T) *stubServer {
	s := &stubServer{assign: make(chan agentapi.Assignment, 10), events: make(chan agentapi.JobEvent, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == agentapi.Prefix+"/register":
			var req agentapi.RegisterRequest
			json.NewDecoder(r.Body).Decode(&req)
			json.NewEncoder(w).Encode(agentapi.RegisterResponse{NodeID: req.NodeID, NodeToken: "node-token",
				HeartbeatInterval: time.Second, PollTimeout: 100 * time.Millisecond})
		case r.URL.Path == agentapi.Prefix+"/poll":
			var resp agentapi.PollResponse
			select {
			case a := <-s.assign:
				resp.Assign = &a
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			json.NewEncoder(w).Encode(resp)
		case strings.HasSuffix(r.URL.Path, "/events"):
			var ev agentapi.JobEvent
			json.NewDecoder(r.Body).Decode(&ev)
			s.events <- ev
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func newTestProvider(t *testing.T, d time.Duration) *Provider {
	p, err := New(Options{JobDuration: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformance(t *testing.T) {
	srv := newStubServer(t)
	providertest.Run(t,
		func(t *testing.T) provider.Provider { return newTestProvider(t, 0) },
		func(id string) provider.NodeSpec {
			return provider.NodeSpec{NodeID: id, VCPUs: 2, MemoryGB: 4, ServerURL: srv.URL, JoinToken: "join"}
		})
}

func (s *stubServer) event(t *testing.T) agentapi.JobEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no job event within 10s")
		return agentapi.JobEvent{}
	}
}

func TestRunsAssignmentForItsDuration(t *testing.T) {
	srv := newStubServer(t)
	p := newTestProvider(t, time.Hour)
	if _, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "n1", ServerURL: srv.URL, JoinToken: "join"}); err != nil {
		t.Fatal(err)
	}
	srv.assign <- agentapi.Assignment{UID: "j1", Attempt: 1, Env: map[string]string{DurationEnv: "50ms"}}
	if ev := srv.event(t); ev.UID != "j1" || ev.Phase != agentapi.PhaseRunning {
		t.Fatalf("first event %+v; want j1 running", ev)
	}
	ev := srv.event(t)
	if ev.UID != "j1" || ev.Phase != agentapi.PhaseExited || ev.ExitCode != 0 {
		t.Fatalf("second event %+v; want j1 exited 0", ev)
	}
	if d := ev.Ended.Sub(ev.Started); d < 50*time.Millisecond {
		t.Errorf("the job ran %s; want at least 50ms", d)
	}
}
