package agent

import (
	"context"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

// fakeLauncher is the launcher's end of a prepared container's connection:
// gone tells when the agent has closed its end (dropped the container).
type fakeLauncher struct {
	conn *net.UnixConn
}

func (l fakeLauncher) gone() bool {
	_ = l.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := l.conn.Read(b[:])
	return err != nil && !os.IsTimeout(err)
}

// socketPair is a connected pair of unix sockets.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// poolAgent is an agent whose prepared containers are socket pairs, made
// when gate lets them; their launchers' ends arrive on made.
func poolAgent(t *testing.T, clk clock.Clock) (a *agent, gate chan struct{}, made chan fakeLauncher) {
	gate, made = make(chan struct{}, 16), make(chan fakeLauncher, 16)
	a = &agent{cfg: Config{Log: slog.New(slog.DiscardHandler)}, clk: clk, life: context.Background()}
	a.setLogger()
	a.startContainer = func(pc *preparedContainer, image string) error {
		<-gate
		agentEnd, launcherEnd := socketPair(t)
		pc.conn = agentEnd
		made <- fakeLauncher{launcherEnd}
		return nil
	}
	return a, gate, made
}

func (a *agent) poolSize() int {
	a.prepMu.Lock()
	defer a.prepMu.Unlock()
	return len(a.prep)
}

// The pool of prepared containers: a job that fits takes one (waiting for
// one on its way, which deepens the pool), a job of another image does
// not, preparing another image drops the pool, an idle container goes
// after preparedIdle (and the pool gets shallower), and stopping drops
// the rest.
func TestPreparedPool(t *testing.T) {
	clk := clock.NewFake(time.Now())
	a, gate, made := poolAgent(t, clk)
	job := agentapi.Assignment{UID: "j", Image: "img"}

	a.prepare("img")
	taken := make(chan *preparedContainer)
	go func() { taken <- a.takePrepared(job, nil) }()
	// The job has claimed the container still on its way (the pool is
	// empty) before the container is let ready: it found none ready.
	for deadline := time.Now().Add(10 * time.Second); a.poolSize() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job did not claim the container on its way")
		}
	}
	gate <- struct{}{} // the container on its way is ready now
	pc := <-taken
	first := <-made
	if pc == nil || pc.file == nil {
		t.Fatalf("the job took %+v, want the prepared container", pc)
	}
	pc.handedOver()
	if !first.gone() {
		t.Error("the agent still holds the taken container's connection after handing it over")
	}

	// The job found none ready: two are kept now.
	a.prepare("img")
	if n := a.poolSize(); n != 2 {
		t.Fatalf("pool of %d after a job waited, want 2", n)
	}
	gate <- struct{}{}
	gate <- struct{}{}
	b, c := <-made, <-made
	if got := a.takePrepared(agentapi.Assignment{UID: "gpu", Image: "img", GPUs: []int{0}}, nil); got != nil {
		t.Error("a job with GPUs took a prepared container")
	}
	if got := a.takePrepared(agentapi.Assignment{UID: "o", Image: "other"}, nil); got != nil {
		t.Error("a job of another image took a prepared container")
	}
	if n := a.poolSize(); n != 2 {
		t.Fatalf("pool of %d after jobs that do not fit, want 2", n)
	}

	// Another image: the pool is dropped and made again for it.
	a.prepare("other")
	if !b.gone() || !c.gone() {
		t.Error("the containers of the previous image were not dropped")
	}
	gate <- struct{}{}
	gate <- struct{}{}
	d, e := <-made, <-made

	// Idle: each waits preparedIdle, then goes and makes the pool shallower.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, 5); err != nil { // the timers of all five made so far
		t.Fatal(err)
	}
	clk.Step(preparedIdle)
	if !d.gone() || !e.gone() {
		t.Error("idle prepared containers were not dropped")
	}
	a.prepMu.Lock()
	depth := a.prepDepth
	a.prepMu.Unlock()
	if depth != 1 {
		t.Errorf("depth %d after both idled out, want 1", depth)
	}

	a.prepare("other")
	gate <- struct{}{}
	f := <-made
	a.stopPreparing()
	if !f.gone() {
		t.Error("stopping the agent left a prepared container")
	}
	a.prepare("other")
	if n := a.poolSize(); n != 0 {
		t.Errorf("prepared %d containers after the agent stopped", n)
	}
}
