package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A node host runs each node it is told to as an agent of its own (its
// work dir, its lock held while it runs), starts a node it runs already
// only once, stops one node without the others, and refuses a second host
// of its folder.
func TestHostRunsAndStopsNodes(t *testing.T) {
	f := newFakeServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	base := DefaultConfig()
	base.LogInterval, base.MinBackoff, base.MaxBackoff, base.StopTimeout = 20*time.Millisecond, 10*time.Millisecond, 100*time.Millisecond, 5*time.Second
	go func() { done <- Host(ctx, HostConfig{Dir: filepath.Join(dir, "host"), Base: base, Log: testLogger(t)}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the host did not stop within 10s")
		}
	})
	c := HostClient{Dir: filepath.Join(dir, "host")}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, err := c.Nodes(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the host does not serve its socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	node := func(id string) HostNode {
		nd := filepath.Join(dir, id)
		return HostNode{NodeID: id, WorkDir: filepath.Join(nd, "work"), ServerURL: f.srv.URL, JoinToken: f.joinToken,
			Address: "127.0.0.1", LogFile: filepath.Join(nd, "agent.log")}
	}
	for _, id := range []string{"n1", "n2", "n1"} {
		if _, err := c.Start(ctx, node(id)); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	registers := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.registers
	}
	f.waitFor(10*time.Second, "both nodes registered", func() bool { return registers() >= 2 })
	if n := registers(); n != 2 {
		t.Errorf("%d registrations; want one per node", n)
	}
	ids, pid, err := c.Nodes(ctx)
	if err != nil || !slices.Equal(ids, []string{"n1", "n2"}) || pid == 0 {
		t.Fatalf("nodes %v (host pid %d), %v; want n1 and n2", ids, pid, err)
	}
	for _, id := range ids {
		if !HostedNodeRuns(filepath.Join(dir, id)) {
			t.Errorf("%s's lock is not held while it runs", id)
		}
	}
	if err := c.Stop(ctx, "n1", time.Second); err != nil {
		t.Fatal(err)
	}
	if HostedNodeRuns(filepath.Join(dir, "n1")) || !HostedNodeRuns(filepath.Join(dir, "n2")) {
		t.Errorf("after n1 stopped: n1 runs %v, n2 runs %v; want n2 alone", HostedNodeRuns(filepath.Join(dir, "n1")), HostedNodeRuns(filepath.Join(dir, "n2")))
	}
	if ids, _, _ := c.Nodes(ctx); !slices.Equal(ids, []string{"n2"}) {
		t.Errorf("nodes after n1 stopped: %v", ids)
	}
	if err := Host(ctx, HostConfig{Dir: filepath.Join(dir, "host"), Base: base}); err == nil {
		t.Error("a second host of the same folder started")
	}
	if _, err := (HostClient{Dir: filepath.Join(dir, "none")}).Start(ctx, node("n3")); !errors.Is(err, ErrNoHost) {
		t.Errorf("start on a folder no host serves: %v; want ErrNoHost", err)
	}
}

// A host whose folder's path is longer than a unix socket's address takes
// (a data dir under a long temporary folder) still serves its socket, and
// a second host of the folder still finds it served.
func TestHostServesALongFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-folder-name/", 6), "host")
	if len(filepath.Join(dir, hostSocketName)) <= 108 {
		t.Fatalf("the socket's path %q is not longer than a socket address", dir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Host(ctx, HostConfig{Dir: dir, Base: DefaultConfig(), Log: testLogger(t)}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := HostClient{Dir: dir}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, pid, err := c.Nodes(ctx)
		if err == nil && pid == os.Getpid() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host does not serve its socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := Host(ctx, HostConfig{Dir: dir, Base: DefaultConfig()}); err == nil || !strings.Contains(err.Error(), "served already") {
		t.Errorf("a second host of the folder: %v; want it refused as served already", err)
	}
}
