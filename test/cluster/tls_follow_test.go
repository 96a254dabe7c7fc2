package cluster

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
)

// A node that joined a server serving plain HTTP carries on when the
// server restarts with --tls-self-signed: its agent, still running, is
// answered where it joined and told the certificate there, moves to HTTPS
// at the same address, and runs the next job; it is not left to fail its
// heartbeats and be replaced. What is not an agent's gets told to use
// HTTPS.
func TestAgentsFollowTheServerToTLS(t *testing.T) {
	s := startServer(t)
	s.createCompute("follow", 1, 1, "PT600S")
	node := ""
	waitFor(t, "the node to be idle", 2*time.Minute, func() bool {
		nodes, err := s.c.ListNodes(bctx, "follow")
		if err == nil && len(nodes) == 1 && nodes[0].NodeState == "idle" {
			node = nodes[0].NodeID
		}
		return node != ""
	})
	s.submit("before", "follow", "echo over plain HTTP")
	if j := s.waitJob("before", api.JobCompleted, 2*time.Minute); j.Properties.Status != api.JobCompleted {
		t.Fatalf("before: %s %s", j.Properties.Status, j.Properties.StatusMessage)
	}

	s.stop()
	s.start("--tls-self-signed")
	if !strings.HasPrefix(s.c.Server(), "https://localhost:") {
		t.Fatalf("after the restart the CLI config names %s, want https://localhost:…", s.c.Server())
	}
	s.submit("after", "follow", "echo over TLS")
	j := s.waitJob("after", api.JobCompleted, 2*time.Minute)
	if j.Properties.Status != api.JobCompleted || len(j.Properties.Attempts) != 1 || len(j.Properties.Attempts[0].Nodes) != 1 ||
		j.Properties.Attempts[0].Nodes[0] != node {
		t.Fatalf("after: %s %q, attempts %+v; want it completed on %s, the node that joined over plain HTTP", j.Properties.Status, j.Properties.StatusMessage, j.Properties.Attempts, node)
	}
	if l := s.jobLog("after"); !strings.Contains(l, "over TLS") {
		t.Errorf("after: log %q", l)
	}
	b, err := os.ReadFile(filepath.Join(config.NodesDir(s.dataDir), node, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	if l := string(b); !strings.Contains(l, "the control plane serves HTTPS now: moved to it") || !strings.Contains(l, "to=https://"+s.addr) ||
		strings.Contains(l, "HTTP request to an HTTPS server") {
		t.Errorf("the agent's log does not say it moved to https://%s:\n%s", s.addr, tail(l, 4000))
	}
	if nodes, err := s.c.ListNodes(bctx, "follow"); err != nil || len(nodes) != 1 || nodes[0].NodeID != node {
		t.Errorf("nodes after the restart: %+v %v; want %s alone", nodes, err, node)
	}

	// Over plain HTTP the server answers agents only.
	resp, err := http.Get("http://" + s.addr + "/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default?api-version=2024-04-01")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "this server serves HTTPS: use https://localhost:") {
		t.Errorf("plain HTTP to the API: %d %s", resp.StatusCode, body)
	}
}
