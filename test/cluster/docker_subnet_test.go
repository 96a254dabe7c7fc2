package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider/docker"
	"github.com/cumulus-ml/cumulus/internal/subnet"
)

// shProbe defines probe HOST PORT for the jobs' busybox shell: it prints
// CONNECTED HOST <greeting> when a listener there answers, UNREACHABLE
// HOST <why> otherwise (refused or timed out).
const shProbe = `probe() { if out=$(nc -w 4 "$1" "$2" </dev/null 2>&1) && [ -n "$out" ]; then echo "CONNECTED $1 $out"; else echo "UNREACHABLE $1 $out"; fi; }; `

// On the docker provider, the nodes of a compute with a subnet are
// containers on a Docker network of the subnet's own: without a public IP
// they reach each other (a two-node rendezvous), the control plane (their
// logs stream) and nothing else — not a listener outside (in a network
// namespace the test makes), not a host service at their bridge's
// address, not a node of another subnet — while a node of a compute
// without isolation, and a node of the same subnet with a public IP,
// reach the outside. The server serves TLS. When the clusters scale to
// zero, the networks and their firewall rules are gone.
func TestDockerSubnetNetworks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("subnet networks need root: this test runs as root in CI")
	}
	for _, tool := range []string{"ip", "iptables", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
	requireDocker(t)
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	subnetA := "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/d" + tag + "/subnets/a"
	subnetB := "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/d" + tag + "/subnets/b"
	planA, planB := subnet.PlanFor("10.232.", subnetA, ""), subnet.PlanFor("10.232.", subnetB, "")
	if planA.X == planB.X {
		t.Skipf("subnets a and b of vnet d%s hash to one range", tag)
	}
	netA, netB := "cumulus-subnet-"+planA.Hex, "cumulus-subnet-"+planB.Hex

	// Whatever the test leaves when it fails half way: the networks and
	// the rules of their bridges (after the containers: cleanups run last
	// first, and dockerServer registers the containers' removal later).
	var owner string
	t.Cleanup(func() {
		if owner == "" {
			return
		}
		out, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label="+docker.LabelOwner+"="+owner).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"network", "rm"}, ids...)...).Run()
		}
		for _, p := range []subnet.Plan{planA, planB} {
			subnet.UnfenceAll("cms" + p.Hex)
		}
	})

	// The outside: a namespace of the test's own with 10.234.250.2, joined
	// to the host by a veth (10.234.250.1), and a listener in it.
	outNS, outHost := "cdt"+tag, "cdto"+tag
	outsideNamespace(t, outNS, outHost, "10.234.250.1", "10.234.250.2")
	serveIn(t, outNS, "10.234.250.2:7171")
	// A host service on every address would answer at the bridge's .1 but
	// for the firewall rules: the subnet's nodes must not reach it.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	_, anyPort, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	serveIn(t, "", "0.0.0.0:"+anyPort)

	// Over TLS: the agents of a subnet check the server's certificate for
	// its name while they reach it at their bridge's address.
	s := dockerServer(t, "--tls-self-signed")
	owner = filepath.Join(s.dataDir, "nodes")
	s.createEnvironment("busybox", "1", testImage)
	ctx := context.Background()
	mk := s.createNetCompute
	mk("open", "", 1, true)
	mk("suba", subnetA, 2, false)
	mk("puba", subnetA, 1, true) // subnet a with a public IP: NAT beyond it
	mk("subb", subnetB, 1, false)
	got, err := s.c.GetCompute(ctx, "suba")
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Aml().NetworkIsolation; !strings.Contains(d, netA) || !strings.Contains(d, planA.CIDR()) || !strings.Contains(d, "nothing beyond") {
		t.Errorf("networkIsolation of suba = %q, want its network %s, range %s and nothing beyond", d, netA, planA.CIDR())
	}
	if got, _ := s.c.GetCompute(ctx, "puba"); !strings.Contains(got.Aml().NetworkIsolation, "NAT") {
		t.Errorf("networkIsolation of puba = %q, want a way out through NAT", got.Aml().NetworkIsolation)
	}

	outside := shProbe + "probe 10.234.250.2 7171"
	s.submitJob(imageJob("open-out", "open", "azureml:busybox:1", outside))
	s.submitJob(imageJob("pub-out", "puba", "azureml:busybox:1", outside))
	pair := api.Job{Name: "a-pair", Properties: api.JobProperties{ComputeID: "suba", EnvironmentID: "azureml:busybox:1",
		Resources: &api.JobResources{InstanceCount: 2},
		Command: shProbe + `echo "ips $CUMULUS_NODE_IPS"; rank0=${CUMULUS_NODE_IPS%%,*}
if [ "$CUMULUS_NODE_RANK" = 0 ]; then nc -l -p 7070 -e echo hello-from-rank-0 && echo SERVED
else for i in $(seq 60); do probe "$rank0" 7070 > /tmp/r; grep -q CONNECTED /tmp/r && break; sleep 1; done; cat /tmp/r; fi
probe 10.234.250.2 7171; probe ` + planA.HostIP() + " " + anyPort + "; exit 0"}}
	s.submitJob(pair)
	s.submitJob(imageJob("b-out", "subb", "azureml:busybox:1", outside))

	s.waitJob("open-out", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("open-out"); !strings.Contains(l, "CONNECTED 10.234.250.2 outside") {
		t.Errorf("the job without isolation should reach the outside listener; log:\n%s", l)
	}
	s.waitJob("pub-out", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("pub-out"); !strings.Contains(l, "CONNECTED 10.234.250.2 outside") {
		t.Errorf("the job of a subnet node with a public IP should reach the outside; log:\n%s", l)
	}
	s.waitJob("a-pair", api.JobCompleted, 3*time.Minute)
	r0, r1 := s.rankLog("a-pair", 0), s.rankLog("a-pair", 1)
	if !strings.Contains(r0, "SERVED") || !strings.Contains(r1, "CONNECTED") || !strings.Contains(r1, "hello-from-rank-0") {
		t.Errorf("rank 1 should reach rank 0 in subnet a; rank 0:\n%s\nrank 1:\n%s", r0, r1)
	}
	prefix := strings.TrimSuffix(planA.CIDR(), "0/24")
	for i, l := range []string{r0, r1} {
		if !strings.Contains(l, "UNREACHABLE 10.234.250.2") || !strings.Contains(l, "UNREACHABLE "+planA.HostIP()) {
			t.Errorf("rank %d of subnet a should reach neither the outside nor a host service at the bridge's address; log:\n%s", i, l)
		}
		if !strings.Contains(l, "ips "+prefix) {
			t.Errorf("rank %d: node addresses not in %s; log:\n%s", i, planA.CIDR(), l)
		}
	}
	s.waitJob("b-out", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("b-out"); !strings.Contains(l, "UNREACHABLE 10.234.250.2") {
		t.Errorf("the job of subnet b should not reach the outside; log:\n%s", l)
	}

	// Subnet a's nodes are idle now (for 5 s): b cannot reach them.
	nodesA, err := s.c.ListNodes(ctx, "suba")
	if err != nil || len(nodesA) == 0 {
		t.Fatalf("nodes of suba: %v %v", nodesA, err)
	}
	ipA := ""
	for _, n := range nodesA {
		if strings.HasPrefix(n.PrivateIPAddress, prefix) {
			ipA = n.PrivateIPAddress
		}
	}
	if ipA == "" {
		t.Fatalf("no node of suba has an address in %s: %+v", planA.CIDR(), nodesA)
	}
	s.submitJob(imageJob("b-to-a", "subb", "azureml:busybox:1", shProbe+"probe "+ipA+" 22; probe "+ipA+" 7070"))
	s.waitJob("b-to-a", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("b-to-a"); !strings.Contains(l, "UNREACHABLE "+ipA) || strings.Contains(l, "CONNECTED") || !strings.Contains(l, "timed out") {
		t.Errorf("a node of subnet b should not reach %s of subnet a (a timeout, not a refusal); log:\n%s", ipA, l)
	}
	t.Logf("open-out:\n%s\npub-out:\n%s\na-pair rank 0:\n%s\nrank 1:\n%s\nb-to-a:\n%s", s.jobLog("open-out"), s.jobLog("pub-out"), r0, r1, s.jobLog("b-to-a"))

	// Scale to zero: no network or rule is left.
	waitFor(t, "the clusters to scale to zero", 2*time.Minute, func() bool {
		for _, name := range []string{"open", "suba", "puba", "subb"} {
			if ns, err := s.c.ListNodes(ctx, name); err != nil || len(ns) > 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, "the subnet networks to go", 30*time.Second, func() bool {
		out, _ := exec.Command("docker", "network", "ls", "--format", "{{.Name}}").Output()
		return !strings.Contains(string(out), netA) && !strings.Contains(string(out), netB)
	})
	if out, _ := exec.Command("iptables", "-w", "-S").Output(); strings.Contains(string(out), "cms"+planA.Hex) || strings.Contains(string(out), "cms"+planB.Hex) {
		t.Errorf("iptables rules of the subnets' bridges are left:\n%s", out)
	}
}
