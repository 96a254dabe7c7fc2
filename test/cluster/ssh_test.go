package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A real OpenSSH client logs into a node of a cluster with an admin key,
// runs a command, and the node is not scaled down while a session is open.
func TestSSHToNode(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssh-client is required in CI")
		}
		t.Skip("skipping: no ssh client here")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	zero, one := int32(0), int32(1)
	c := api.Compute{Name: "debug"}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT2S"}
	a.UserAccountCredentials = &api.UserAccountCredentials{AdminUserName: "azureuser", AdminUserSSHPublicKey: strings.TrimSpace(string(pub))}
	if _, resp, err := s.c.PutCompute(bctx, c); err != nil {
		t.Fatal(err)
	} else if err := s.c.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	s.submit("warm-up", "debug", "true") // brings a node up
	s.waitJob("warm-up", api.JobCompleted, 60*time.Second)
	var node string
	waitFor(t, "the node's SSH port", 20*time.Second, func() bool {
		ns, err := s.c.ListNodes(bctx, "debug")
		if err != nil || len(ns) != 1 || ns[0].Port == 0 {
			return false
		}
		node = ns[0].NodeID
		return true
	})
	sshArgs := func(extra ...string) []string {
		return append([]string{"compute", "connect-ssh", "-n", "debug", "--node-id", node, "--private-key-file", key, "--",
			"-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts"), "-o", "BatchMode=yes"}, extra...)
	}
	// The CLI runs ssh; options after "--" are appended before the command.
	out, errOut, code := s.cli(dir, append(sshArgs(), "echo hello from $CUMULUS_NODE_ID")...)
	if code != 0 || !strings.Contains(out, "hello from "+node) {
		t.Fatalf("ssh command: exit %d out %q err %q", code, out, errOut)
	}
	// A long session keeps the node although its idle time (2 s) passes
	// three times over: were the node removed, the session would break
	// before "still here". (The rule itself is tested on a fake clock in
	// the controller's tests.)
	long := exec.Command(binary, append(sshArgs(), "sleep 6; echo still here")...)
	long.Dir = dir
	long.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(s.dataDir, "config.yaml"))
	var buf strings.Builder
	long.Stdout = &buf
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	if err := long.Wait(); err != nil || !strings.Contains(buf.String(), "still here") {
		t.Fatalf("long session: %v %q", err, buf.String())
	}
	if ns, err := s.c.ListNodes(bctx, "debug"); err != nil || len(ns) != 1 {
		t.Fatalf("the node was scaled down under an open SSH session: %v %v", ns, err)
	}
	waitFor(t, "the node to go after the session closed", 20*time.Second, func() bool {
		ns, err := s.c.ListNodes(bctx, "debug")
		return err == nil && len(ns) == 0
	})
	// The node is gone now; a command to it says so in one line.
	if _, errOut, code := s.cli(dir, sshArgs("true")...); code == 0 || !strings.HasPrefix(errOut, "error: ") {
		t.Fatalf("connect-ssh to a removed node: exit %d %q", code, errOut)
	}
}
