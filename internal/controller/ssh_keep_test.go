package controller

import (
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// setSSH plays a node's agent reporting its open SSH sessions, as the
// poll handler records them.
func (h *harness) setSSH(c api.Compute, sessions int) {
	h.t.Helper()
	for _, n := range h.nodes(c) {
		n.SSHOpen = sessions
		if err := store.PutNode(h.ctx, h.db.Q(), n); err != nil {
			h.t.Fatal(err)
		}
	}
}

// An idle node with someone logged in over SSH is busy: its idle time may
// pass many times over and it stays; once the session closes, the idle
// time counts again from then and the node goes.
func TestOpenSSHSessionKeepsIdleNode(t *testing.T) {
	h := newHarness(t)
	c := h.compute("debug", 0, 1, "PT2S")
	job := h.submit(c, 1)
	h.pass()
	h.register(c)
	h.pass()
	h.finish(job, 0)
	h.setSSH(c, 1)
	for range 3 {
		h.clk.Step(2 * time.Second)
		h.heartbeat(c)
		h.pass()
		if ns := h.nodes(c); len(ns) != 1 {
			t.Fatalf("%d nodes with an SSH session open past the idle time, want the node kept", len(ns))
		}
	}
	if len(h.prov.DeleteCalls) != 0 {
		t.Fatalf("provider deleted %v under an open session", h.prov.DeleteCalls)
	}

	// The session closes: the server restarts the node's idle time (the
	// poll handler does), and the node goes one idle time later.
	ns := h.nodes(c)
	ns[0].SSHOpen, ns[0].IdleSince = 0, h.clk.Now()
	if err := store.PutNode(h.ctx, h.db.Q(), ns[0]); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 1 {
		t.Fatalf("%d nodes 1 s after the session closed, want 1 (idle time 2 s)", got)
	}
	h.clk.Step(time.Second)
	h.heartbeat(c)
	h.pass()
	if got := len(h.nodes(c)); got != 0 {
		t.Fatalf("%d nodes 2 s after the session closed, want 0", got)
	}
}
