package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Any machine joins a cluster by hand with `cumulus agent --server URL
// --join-token T`, and jobs run on it.
func TestAgentJoinsByHand(t *testing.T) {
	s := startServer(t)
	s.createCompute("byhand", 0, 1, "PT10M")
	tok, command, err := s.c.JoinToken(bctx, "byhand")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(command, tok) || !strings.HasPrefix(command, "cumulus agent --server ") {
		t.Fatalf("join command %q does not say how to join", command)
	}
	work := t.TempDir()
	log, err := os.Create(filepath.Join(work, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	agent := exec.Command(binary, "agent", "--server", s.c.BaseURL, "--join-token", tok, "--work-dir", filepath.Join(work, "w"))
	agent.Stdout, agent.Stderr = log, log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		_ = agent.Wait()
	}()
	waitFor(t, "the hand-joined node to be idle", 20*time.Second, func() bool {
		n, err := s.c.ListNodes(bctx, "byhand")
		return err == nil && len(n) == 1 && n[0].NodeState == api.NodeIdle
	})
	s.submit("on-my-machine", "byhand", "echo ran on $CUMULUS_NODE_ID")
	waitFor(t, "the job to complete", 20*time.Second, func() bool {
		return s.job("on-my-machine").Properties.Status == api.JobCompleted
	})
	nodes, err := s.c.ListNodes(bctx, "byhand")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || !strings.Contains(s.jobLog("on-my-machine"), "ran on "+nodes[0].NodeID) {
		t.Fatalf("job did not run on the hand-joined node %+v: %q", nodes, s.jobLog("on-my-machine"))
	}
	// The token is replaced by the next one: the old one no longer joins.
	if _, _, err := s.c.JoinToken(bctx, "byhand"); err != nil {
		t.Fatal(err)
	}
	old := exec.Command(binary, "agent", "--server", s.c.BaseURL, "--join-token", tok, "--work-dir", filepath.Join(work, "w2"))
	out, err := old.CombinedOutput()
	if err == nil {
		t.Fatalf("an agent with a replaced join token joined: %s", out)
	}
}
