package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// StubServer stands in for the control plane in provider tests: it
// accepts registrations (recording each node's join token), holds polls
// briefly so that agents stay alive, hands out the assignments queued in
// Assign (one per poll), records job events in Events, and takes logs and
// outputs.
type StubServer struct {
	*httptest.Server
	Assign chan agentapi.Assignment
	Events chan agentapi.JobEvent

	mu     sync.Mutex
	tokens map[string]string         // node id → join token it registered with
	gpus   map[string][]agentapi.GPU // node id → the devices it registered with
}

// NewStubServer starts a stub on loopback, closed with the test.
func NewStubServer(t *testing.T) *StubServer {
	const hold = 200 * time.Millisecond
	s := &StubServer{Assign: make(chan agentapi.Assignment, 10), Events: make(chan agentapi.JobEvent, 100), tokens: map[string]string{}, gpus: map[string][]agentapi.GPU{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == agentapi.Prefix+"/register":
			var req agentapi.RegisterRequest
			json.NewDecoder(r.Body).Decode(&req)
			s.mu.Lock()
			s.tokens[req.NodeID] = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			s.gpus[req.NodeID] = req.GPUs
			s.mu.Unlock()
			json.NewEncoder(w).Encode(agentapi.RegisterResponse{NodeID: req.NodeID, NodeToken: "node-token",
				HeartbeatInterval: time.Second, PollTimeout: hold})
		case r.URL.Path == agentapi.Prefix+"/poll":
			var resp agentapi.PollResponse
			select {
			case a := <-s.Assign:
				resp.Assign = &a
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
			json.NewEncoder(w).Encode(resp)
		case strings.HasSuffix(r.URL.Path, "/events"):
			var ev agentapi.JobEvent
			json.NewDecoder(r.Body).Decode(&ev)
			s.Events <- ev
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/logs"):
			// Takes every chunk: one job per test, sent in order.
			b, _ := io.ReadAll(r.Body)
			off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			json.NewEncoder(w).Encode(agentapi.LogAck{Size: off + int64(len(b))})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// GPUs are the devices node registered with (nil before it did).
func (s *StubServer) GPUs(node string) []agentapi.GPU {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gpus[node]
}

// Event waits for the next job event.
func (s *StubServer) Event(t *testing.T) agentapi.JobEvent {
	t.Helper()
	select {
	case ev := <-s.Events:
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no job event within 15s")
		return agentapi.JobEvent{}
	}
}

// JoinToken is the token a node registered with ("" until it has).
func (s *StubServer) JoinToken(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[node]
}
