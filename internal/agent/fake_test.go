package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

// fakeServer is the control plane's side of the agent protocol, in memory.
type fakeServer struct {
	t   testing.TB
	srv *httptest.Server

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced at every change below: waitFor wakes on it
	joinToken   string
	nodeToken   string
	registers   int
	regGPUs     []agentapi.GPU // the devices the last registration offered
	regStatus   int            // answer register with this status when set
	regRefused  int            // registrations answered with an error status
	pollTimeout time.Duration  // told to the agent at register; 0: 1s
	hold        time.Duration  // a poll without instruction is answered after this; 0: 30ms, <0: never
	polls       []agentapi.PollRequest
	instr       []agentapi.PollResponse // handed out one per poll
	events      map[string][]agentapi.JobEvent
	logs        map[string][]byte
	logPosts    int
	logRefused  int // log posts answered 503
	outputs     map[string]map[string][]byte
	blobs       map[string][]byte
	fileLists   map[string]agentapi.FileList // "<uid>/code/files", "<uid>/inputs/<name>/files"
	down        bool                         // every agent call answers 503
	logsDown    bool                         // log calls answer 503
}

func newFakeServer(t testing.TB) *fakeServer {
	f := &fakeServer{
		t:         t,
		changed:   make(chan struct{}),
		joinToken: "join-secret",
		nodeToken: "node-secret",
		events:    map[string][]agentapi.JobEvent{},
		logs:      map[string][]byte{},
		outputs:   map[string]map[string][]byte{},
		blobs:     map[string][]byte{},
		fileLists: map[string]agentapi.FileList{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// notify wakes whoever waits for a change; f.mu is held.
func (f *fakeServer) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	isLog := strings.HasSuffix(p, "/logs") && r.Method == http.MethodPost
	f.mu.Lock()
	down, logsDown := f.down, f.logsDown
	if down || (logsDown && isLog) {
		if isLog {
			f.logRefused++
		}
		if p == agentapi.Prefix+"/register" {
			f.regRefused++
		}
		f.notify()
	}
	f.mu.Unlock()
	if down {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
		return
	}
	auth := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if p == agentapi.Prefix+"/register" {
		f.register(w, r, auth)
		return
	}
	if auth != f.nodeToken {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	switch {
	case p == agentapi.Prefix+"/poll":
		f.poll(w, r)
	case strings.HasPrefix(p, agentapi.BlobPrefix+"/"):
		f.mu.Lock()
		b, ok := f.blobs[strings.TrimPrefix(p, agentapi.BlobPrefix+"/")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	case strings.HasPrefix(p, agentapi.Prefix+"/jobs/"):
		parts := strings.Split(strings.TrimPrefix(p, agentapi.Prefix+"/jobs/"), "/")
		uid := parts[0]
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		switch {
		case r.Method == http.MethodGet && parts[len(parts)-1] == "files":
			f.mu.Lock()
			l, ok := f.fileLists[strings.Join(parts, "/")]
			f.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			json.NewEncoder(w).Encode(l)
		case len(parts) == 2 && parts[1] == "events" && r.Method == http.MethodPost:
			var ev agentapi.JobEvent
			if err := json.Unmarshal(body, &ev); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			f.mu.Lock()
			f.events[uid] = append(f.events[uid], ev)
			f.notify()
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case len(parts) == 2 && parts[1] == "logs" && r.Method == http.MethodPost:
			if logsDown {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			off, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			if err != nil {
				http.Error(w, "offset", http.StatusBadRequest)
				return
			}
			f.mu.Lock()
			f.logPosts++
			if off == int64(len(f.logs[uid])) {
				f.logs[uid] = append(f.logs[uid], body...)
			}
			size := int64(len(f.logs[uid]))
			f.notify()
			f.mu.Unlock()
			json.NewEncoder(w).Encode(agentapi.LogAck{Size: size})
		case len(parts) == 3 && parts[1] == "outputs" && r.Method == http.MethodPut:
			f.mu.Lock()
			if f.outputs[uid] == nil {
				f.outputs[uid] = map[string][]byte{}
			}
			f.outputs[uid][parts[2]] = body
			f.notify()
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeServer) register(w http.ResponseWriter, r *http.Request, auth string) {
	var req agentapi.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if f.regStatus != 0 {
		f.regRefused++
		http.Error(w, "no", f.regStatus)
		return
	}
	if auth != f.joinToken {
		f.regRefused++
		http.Error(w, "bad join token", http.StatusUnauthorized)
		return
	}
	f.registers++
	f.regGPUs = req.GPUs
	id := req.NodeID
	if id == "" {
		id = "node-1"
	}
	pt := f.pollTimeout
	if pt == 0 {
		pt = time.Second
	}
	json.NewEncoder(w).Encode(agentapi.RegisterResponse{NodeID: id, NodeToken: f.nodeToken,
		HeartbeatInterval: time.Second, PollTimeout: pt})
}

// poll hands out the next instruction, or holds the request (as a server
// holds a long poll) and answers "carry on".
func (f *fakeServer) poll(w http.ResponseWriter, r *http.Request) {
	var req agentapi.PollRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	var expired <-chan time.Time // nil: held until the agent gives up
	switch {
	case f.hold == 0:
		expired = time.After(30 * time.Millisecond)
	case f.hold > 0:
		expired = time.After(f.hold)
	}
wait:
	for len(f.instr) == 0 {
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-r.Context().Done():
			return // the agent gave up on this poll: keep instructions for the next
		case <-changed:
			f.mu.Lock()
		case <-expired:
			f.mu.Lock()
			break wait
		}
	}
	f.polls = append(f.polls, req)
	var resp agentapi.PollResponse
	if len(f.instr) > 0 {
		resp = f.instr[0]
		f.instr = f.instr[1:]
	}
	f.notify()
	f.mu.Unlock()
	json.NewEncoder(w).Encode(resp)
}

func (f *fakeServer) send(resp agentapi.PollResponse) {
	f.mu.Lock()
	f.instr = append(f.instr, resp)
	f.notify()
	f.mu.Unlock()
}

func (f *fakeServer) addBlob(b []byte) string {
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	f.mu.Lock()
	f.blobs[h] = bytes.Clone(b)
	f.mu.Unlock()
	return h
}

func (f *fakeServer) set(fn func(f *fakeServer)) {
	f.mu.Lock()
	fn(f)
	f.notify()
	f.mu.Unlock()
}

// eventsOf returns a copy of the events recorded for uid.
func (f *fakeServer) eventsOf(uid string) []agentapi.JobEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agentapi.JobEvent(nil), f.events[uid]...)
}

func (f *fakeServer) logOf(uid string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.logs[uid])
}

func (f *fakeServer) output(uid, name string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outputs[uid][name]
}

// exited waits for the job's exited event.
func (f *fakeServer) exited(uid string, within time.Duration) agentapi.JobEvent {
	f.t.Helper()
	var ev agentapi.JobEvent
	f.waitFor(within, "exited event of "+uid, func() bool {
		for _, e := range f.eventsOf(uid) {
			if e.Phase == agentapi.PhaseExited {
				ev = e
				return true
			}
		}
		return false
	})
	return ev
}

// waitFor waits until cond, which reads the fake server's state (and
// nothing else), holds: it checks again at every change of that state,
// and fails the test when within passes first.
func (f *fakeServer) waitFor(within time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(within)
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			f.t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
}

// blockUntil waits until n timers wait on the agent's fake clock, so that
// a Step fires the timer the agent is waiting on instead of racing it.
func blockUntil(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers on the fake clock: %v", n, err)
	}
}

// stillWaiting reports whether a timer still waits on the fake clock.
func stillWaiting(clk *clock.Fake) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return clk.BlockUntil(ctx, 1) == nil
}

// gate is a fifo a job's command reads from once (read x < "$GATE") to
// wait for the test.
type gate struct {
	t *testing.T
	w *os.File
}

// reachGate returns once the job waits at the gate: it opened the fifo to
// read, so everything it wrote before is in its log file.
func reachGate(t *testing.T, path string) *gate {
	t.Helper()
	type opened struct {
		w   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the reader opens it
		ch <- opened{w, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		return &gate{t: t, w: o.w}
	case <-time.After(10 * time.Second):
		// Open the other end so that the goroutine's open returns.
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer r.Close()
		}
		t.Fatal("the job did not reach its gate within 10s")
		return nil
	}
}

// pass lets the job waiting at the gate go on.
func (g *gate) pass() {
	g.t.Helper()
	_, err := g.w.WriteString("go\n")
	if cerr := g.w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		g.t.Fatal(err)
	}
}

// testLogger writes the agent's log to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// runningAgent is an agent run in-process by a test.
type runningAgent struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// wait waits for Run to return and gives its error.
func (ra *runningAgent) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-ra.done:
		return ra.err
	case <-time.After(within):
		t.Fatalf("the agent did not return within %s", within)
		return nil
	}
}

// startAgent runs the agent in-process against f until the test ends.
func startAgent(t testing.TB, f *fakeServer, mod func(*Config)) *runningAgent {
	t.Helper()
	cfg := Config{
		ServerURL:   f.srv.URL,
		JoinToken:   f.joinToken,
		WorkDir:     t.TempDir(),
		Address:     "127.0.0.1",
		Log:         testLogger(t),
		DetectGPUs:  func(context.Context) ([]agentapi.GPU, error) { return nil, nil },
		LogInterval: 20 * time.Millisecond,
		MinBackoff:  10 * time.Millisecond,
		MaxBackoff:  100 * time.Millisecond,
		StopTimeout: 5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAgent{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() {
		ra.err = Run(ctx, cfg)
		close(ra.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ra.done:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not stop within 10s")
		}
	})
	return ra
}
