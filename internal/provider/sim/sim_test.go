package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

// newTestProvider makes a provider whose jobs run d, its nodes in this
// process or, given a host command, in the host's.
func newTestProvider(t *testing.T, d time.Duration, host ...string) *Provider {
	p, err := New(Options{JobDuration: d, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformance(t *testing.T) {
	for name, host := range map[string][]string{"InProcess": nil, "InAHostProcess": hosted} {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewStubServer(t)
			providertest.Run(t,
				func(t *testing.T) provider.Provider { return newTestProvider(t, 0, host...) },
				func(id string) provider.NodeSpec {
					return provider.NodeSpec{NodeID: id, VCPUs: 2, MemoryGB: 4, ServerURL: srv.URL, JoinToken: "join"}
				})
		})
	}
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

// A job that takes no time is reported by the next poll (its start and
// its end), with no events, and only once.
func TestZeroLengthJobRidesOnTheNextPoll(t *testing.T) {
	var mu sync.Mutex
	var polls [][]agentapi.JobState
	events := 0
	assigned := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == agentapi.Prefix+"/register":
			json.NewEncoder(w).Encode(agentapi.RegisterResponse{NodeID: "n1", NodeToken: "node-token", PollTimeout: time.Second})
		case r.URL.Path == agentapi.Prefix+"/poll":
			var req agentapi.PollRequest
			json.NewDecoder(r.Body).Decode(&req)
			var resp agentapi.PollResponse
			mu.Lock()
			polls = append(polls, req.Jobs)
			if !assigned {
				assigned = true
				resp.Assign = &agentapi.Assignment{UID: "j1", Attempt: 1, Env: map[string]string{DurationEnv: "0s"}}
			}
			mu.Unlock()
			if resp.Assign == nil {
				time.Sleep(20 * time.Millisecond) // a held poll, briefly: the agent's loop is not a busy one
			}
			json.NewEncoder(w).Encode(resp)
		case strings.HasSuffix(r.URL.Path, "/events"):
			mu.Lock()
			events++
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	p := newTestProvider(t, time.Hour)
	if _, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "n1", ServerURL: srv.URL, JoinToken: "join"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(polls)
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling what the simulated agent sent; no timing is asserted
	}
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(polls) < 5 {
		t.Fatalf("%d polls in 10s", len(polls))
	}
	if events != 0 {
		t.Errorf("%d events sent; want none", events)
	}
	carried := 0
	for _, jobs := range polls {
		for _, st := range jobs {
			carried++
			if st.UID != "j1" || st.Phase != agentapi.PhaseExited || st.ExitCode != 0 || st.Started.IsZero() || st.Ended.IsZero() {
				t.Errorf("poll carried %+v; want j1 exited 0 with its start and end", st)
			}
		}
	}
	if carried != 1 {
		t.Errorf("j1's end carried by %d polls; want exactly 1", carried)
	}
}

// A node told to reach a control plane at a URL it cannot use is a
// configuration error, and no node is left behind.
func TestBadServerURLIsAConfigurationError(t *testing.T) {
	p := newTestProvider(t, 0)
	_, err := p.Create(context.Background(), provider.NodeSpec{NodeID: "n1", ServerURL: "ftp://nowhere"})
	if !provider.IsConfiguration(err) {
		t.Errorf("Create with an ftp:// server = %v; want a configuration error", err)
	}
	if ins, _ := p.List(context.Background()); len(ins) != 0 {
		t.Errorf("List after a refused Create = %+v; want no node", ins)
	}
}
