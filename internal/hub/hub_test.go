package hub

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestWakeReleasesAWaitingPoll(t *testing.T) {
	h := New()
	done := make(chan bool)
	go func() { done <- h.Wait(context.Background(), "n1", time.Hour) }()
	h.Wake("n1")
	if !<-done {
		t.Fatal("Wait returned false after Wake, want true")
	}
}

// WakeAll wakes every node it is given, past its bursts (what it woke
// before any Wait is kept, as Wake's is).
func TestWakeAllWakesEveryNode(t *testing.T) {
	h := New()
	nodes := make([]string, 3*wakeBurst+5)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i)
	}
	h.WakeAll(nodes)
	for _, n := range nodes {
		if !h.Wait(context.Background(), n, time.Millisecond) {
			t.Fatalf("node %s was not woken", n)
		}
	}
}

func TestWakeBeforeWaitIsNotLost(t *testing.T) {
	h := New()
	h.Wake("n1") // news arrives while the agent is between polls
	if !h.Wait(context.Background(), "n1", time.Hour) {
		t.Fatal("a wake sent before Wait was lost")
	}
}

func TestCloseReleasesEveryPollNowAndLater(t *testing.T) {
	h := New()
	done := make(chan bool)
	go func() { done <- h.Wait(context.Background(), "n1", time.Hour) }()
	h.Close()
	if <-done {
		t.Fatal("Wait returned true after Close, want false (no news)")
	}
	if h.Wait(context.Background(), "n2", time.Hour) {
		t.Fatal("Wait after Close returned true")
	}
}

func TestSeenKeepsTheLatest(t *testing.T) {
	h := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.Seen("n", t0.Add(time.Minute))
	h.Seen("n", t0) // a late report does not move the time back
	if got, ok := h.LastSeen("n"); !ok || !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("LastSeen = %v %v", got, ok)
	}
	h.Forget("n")
	if _, ok := h.LastSeen("n"); ok {
		t.Fatal("a forgotten node is still seen")
	}
}
