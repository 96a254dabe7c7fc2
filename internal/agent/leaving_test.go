package agent

import (
	"context"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/clock"
)

// A job ended by a SIGTERM the agent did not send counts as the node's
// stop when the agent is told to stop within leaveWait (the signal came
// to the whole node), and as the job's own end when it is not.
func TestToldToStop(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	stop := make(chan struct{})
	a := &agent{clk: clk, stopping: stop}
	got := make(chan bool, 1)
	go func() { got <- a.toldToStop() }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	close(stop) // the agent's own SIGTERM comes a moment after the job's
	if !<-got {
		t.Error("an agent told to stop within the wait: not counted as the node's stop")
	}

	clk = clock.NewFake(time.Unix(0, 0)) // the first wait's timer is still there
	a = &agent{clk: clk, stopping: make(chan struct{})}
	go func() { got <- a.toldToStop() }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Step(leaveWait)
	if <-got {
		t.Error("an agent never told to stop: the job's SIGTERM counted as the node's stop")
	}
}
