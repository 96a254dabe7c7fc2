package cluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider/docker"
)

// nodeImageOnce builds the node image the docker tests use from the
// binary under test, once per run: an image left by an earlier run holds
// an older agent.
var (
	nodeImageOnce sync.Once
	nodeImageErr  error
)

// dockerServer is a server whose nodes are containers (--provider docker),
// with a short heartbeat timeout so a killed container is noticed fast,
// and the serve flags given.
func dockerServer(t *testing.T, flags ...string) *server {
	t.Helper()
	requireDocker(t)
	nodeImageOnce.Do(func() {
		if out, err := exec.Command(binary, "node-image", "build", "--tag", "cumulus-node:e2e").CombinedOutput(); err != nil {
			nodeImageErr = fmt.Errorf("build the node image: %v: %s", err, out)
		}
	})
	if nodeImageErr != nil {
		t.Fatal(nodeImageErr)
	}
	s := startServer(t, append([]string{"--provider", "docker", "--node-image", "cumulus-node:e2e", "--heartbeat-timeout", "6s"}, flags...)...)
	t.Cleanup(func() { removeContainers(t, "label="+docker.LabelOwner+"="+filepath.Join(s.dataDir, "nodes")) })
	return s
}

func containers(t *testing.T, filter string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", filter).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func removeContainers(t *testing.T, filter string) {
	if ids := containers(t, filter); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
}

// On the docker provider a node is a container: a job in an image runs (in
// a sibling container the node's agent starts through the Docker socket),
// a killed node container is noticed and replaced with the job requeued, a
// `docker stop` of a low-priority node is a preemption, and after a
// control-plane restart a container without a node record is removed.
func TestDockerProviderNodes(t *testing.T) {
	s := dockerServer(t)
	owner := "label=" + docker.LabelOwner + "=" + filepath.Join(s.dataDir, "nodes")
	s.createCompute("dnodes", 0, 1, "PT60S")
	s.createEnvironment("busybox", "1", testImage)

	s.submitJob(imageJob("in-image", "dnodes", "azureml:busybox:1", `cat /cumulus-test-marker; echo on=$CUMULUS_NODE_ID`))
	s.waitJob("in-image", api.JobCompleted, 90*time.Second)
	node := s.job("in-image").Properties.Attempts[0].Nodes[0]
	if log := s.jobLog("in-image"); !strings.Contains(log, "inside the test image") || !strings.Contains(log, "on="+node) {
		t.Fatalf("log = %q", log)
	}
	if got := containers(t, "name="+docker.ContainerName(node)); len(got) != 1 {
		t.Fatalf("node %s is not a container (%v)", node, got)
	}

	// Kill the node's container from outside while a job runs on it.
	s.submit("survivor", "dnodes", `if [ "$CUMULUS_ATTEMPT" = 1 ]; then echo first; sleep 120; fi; echo done`)
	waitFor(t, "the job running", 60*time.Second, func() bool { return s.job("survivor").Properties.Status == api.JobRunning })
	if out, err := exec.Command("docker", "kill", docker.ContainerName(node)).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	j := s.waitJob("survivor", api.JobCompleted, 90*time.Second)
	if at := j.Properties.Attempts; len(at) != 2 || at[1].Nodes[0] == node || !strings.Contains(at[0].Reason, "heartbeat") {
		t.Fatalf("attempts = %+v, want the job requeued for a lost heartbeat and rerun on a new node", at)
	}
	waitFor(t, "the killed node's container removed", 60*time.Second, func() bool {
		return len(containers(t, "name="+docker.ContainerName(node))) == 0
	})

	// A control-plane restart removes a container that has no node record.
	s.kill9()
	stray := "cumulus-node-stray"
	args := []string{"run", "-d", "--name", stray, "--label", docker.LabelNode + "=stray", "--label", docker.LabelOwner + "=" + filepath.Join(s.dataDir, "nodes"),
		"--init", "--entrypoint", "/bin/sleep", "cumulus-node:e2e", "300"}
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("start a stray container: %v %s", err, out)
	}
	s.start()
	waitFor(t, "the stray container removed", 60*time.Second, func() bool { return len(containers(t, "name="+stray)) == 0 })
	nodes, err := s.c.ListNodes(bctx, "dnodes")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.NodeState != api.NodeUnusable && len(containers(t, "name="+docker.ContainerName(n.NodeID))) != 1 {
			t.Fatalf("node %s (%s) has no container after the restart", n.NodeID, n.NodeState)
		}
	}
	if all := containers(t, owner); len(all) > len(nodes) {
		t.Fatalf("%d containers for %d nodes after the restart", len(all), len(nodes))
	}
}

func TestDockerStopOfLowPriorityNodeIsAPreemption(t *testing.T) {
	s := dockerServer(t)
	s.createLowPriority("dspot", 1, "PT5S")
	s.submit("stopped", "dspot", checkpointing)
	waitFor(t, "the job running", 60*time.Second, func() bool { return s.job("stopped").Properties.Status == api.JobRunning })
	s.checkpointed("stopped")
	node := s.nodeOf("stopped", 0)
	if out, err := exec.Command("docker", "stop", docker.ContainerName(node)).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v %s", err, out)
	}
	j := s.waitJob("stopped", api.JobCompleted, 90*time.Second)
	if at := j.Properties.Attempts; len(at) != 2 || !strings.Contains(at[0].Reason, "preempted on node "+node) {
		t.Fatalf("attempts = %+v, want a preemption of %s", at, node)
	}
	if log := s.jobLog("stopped"); !strings.Contains(log, "attempt=2 found=1") {
		t.Fatalf("attempt 2 did not resume from the checkpoint: %q", log)
	}
}
