package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
)

// netProbe is the jobs' network probe: "connect HOST PORT" prints
// CONNECTED (and exits 0), REFUSED (reachable, nothing listens) or
// UNREACHABLE (exit 3 for both); "pair PORT" has rank 0 serve on its
// address and rank 1 connect to it.
const netProbe = `import os, socket, sys, time
def connect(host, port, tries=1):
    for i in range(tries):
        try:
            s = socket.create_connection((host, port), timeout=5)
            print("CONNECTED", host, s.recv(64).decode().strip(), flush=True)
            return 0
        except ConnectionRefusedError as e:
            err = "REFUSED %s %s" % (host, e)
        except OSError as e:
            err = "UNREACHABLE %s %s" % (host, e)
        time.sleep(0.5)
    print(err, flush=True)
    return 3
if sys.argv[1] == "connect":
    sys.exit(connect(sys.argv[2], int(sys.argv[3])))
ips = os.environ["CUMULUS_NODE_IPS"].split(",")
port = int(sys.argv[2])
print("ips", ips, flush=True)
if os.environ["CUMULUS_NODE_RANK"] == "0":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((ips[0], port))
    l.listen(1)
    l.settimeout(60)
    c, _ = l.accept()
    c.sendall(b"hello-from-rank-0\n")
    c.close()
    print("SERVED", flush=True)
else:
    sys.exit(connect(ips[0], port, 60))
`

// serveIn runs a TCP server that greets with "outside" and the address
// the connection came from, in netns ns (or on the host when ns is ""),
// on host:port, until the test ends.
func serveIn(t *testing.T, ns, hostport string) {
	t.Helper()
	h, p, _ := net.SplitHostPort(hostport)
	code := fmt.Sprintf(`import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind((%q, %s)); l.listen(8)
print("ready", flush=True)
while True:
    c, a = l.accept(); c.sendall(("outside %%s\n" %% a[0]).encode()); c.close()
`, h, p)
	args := []string{"/usr/bin/python3", "-c", code}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatalf("listener %s in %q: %v", hostport, ns, err)
	}
}

func mustRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
}

func netnsList() string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	return string(out)
}

// outsideNamespace makes a namespace of the test's own with address nsAddr
// (a /24), joined to the host by a veth whose host end has hostAddr, with a
// default route through the host; it is removed when the test ends.
func outsideNamespace(t *testing.T, ns, hostEnd, hostAddr, nsAddr string) {
	t.Helper()
	mustRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	mustRun(t, "ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostEnd).Run() })
	mustRun(t, "ip", "addr", "add", hostAddr+"/24", "dev", hostEnd)
	mustRun(t, "ip", "link", "set", hostEnd, "up")
	mustRun(t, "ip", "-n", ns, "addr", "add", nsAddr+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	mustRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	mustRun(t, "ip", "-n", ns, "route", "add", "default", "via", hostAddr)
}

// createNetCompute creates a compute of 0 to max nodes idle for 5 s, in
// subnet (none when ""), with or without public IPs.
func (s *server) createNetCompute(name, subnet string, max int32, public bool) {
	s.t.Helper()
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	min := int32(0)
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: "PT5S"}
	if subnet != "" {
		c.Aml().Subnet = &api.ResourceRef{ID: subnet}
	}
	c.Aml().EnableNodePublicIP = &public
	_, resp, err := s.c.PutCompute(bctx, c)
	if err != nil {
		s.t.Fatalf("create %s: %v", name, err)
	}
	if err := s.c.Wait(bctx, resp, nil); err != nil {
		s.t.Fatal(err)
	}
}

// Nodes of a compute with a subnet and no public IP run in network
// namespaces on the subnet's bridge (root only): they reach each other and
// the control plane (their jobs' logs stream), not a listener outside (in a
// namespace the test makes, 10.231.250.2) nor a node of another subnet,
// while a node of a compute without isolation reaches both the outside
// listener and the host's loopback. When the clusters scale to zero, their
// namespaces, veths, bridges and firewall rules are gone.
func TestSubnetNodesInNetworkNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: this test runs as root in CI")
	}
	for _, tool := range []string{"ip", "nsenter", "iptables", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	subnetA := "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v" + tag + "/subnets/a"
	subnetB := "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v" + tag + "/subnets/b"
	planA, planB := local.PlanSubnet(subnetA, ""), local.PlanSubnet(subnetB, "")
	if planA.X == planB.X {
		t.Skipf("subnets a and b of vnet v%s hash to one range", tag)
	}

	// Whatever the test leaves (it fails half way): the nodes' namespaces,
	// veths and bridges, from their net.json; runs after the server and
	// its agents are stopped (cleanups run last first).
	var dataDir string
	bridges := []string{planA.Bridge, planB.Bridge}
	t.Cleanup(func() {
		if dataDir == "" {
			return
		}
		files, _ := filepath.Glob(filepath.Join(config.NodesDir(dataDir), "*", "net.json"))
		for _, f := range files {
			var n struct{ Bridge, Namespace, Veth string }
			if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &n) == nil {
				_ = exec.Command("ip", "netns", "del", n.Namespace).Run()
				_ = exec.Command("ip", "link", "del", n.Veth).Run()
			}
		}
		for _, table := range []string{"filter", "nat"} { // the public node's rules name its address
			out, _ := exec.Command("iptables", "-w", "-t", table, "-S").Output()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, " "+strings.TrimSuffix(planA.CIDR(), "0/24")) && strings.HasPrefix(line, "-A ") {
					_ = exec.Command("sh", "-c", "iptables -w -t "+table+" -D "+strings.TrimPrefix(line, "-A ")).Run()
				}
			}
		}
		for _, b := range bridges {
			_ = exec.Command("ip", "link", "del", b).Run()
			out, _ := exec.Command("iptables", "-w", "-S").Output()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, " "+b+" ") && strings.HasPrefix(line, "-A ") {
					_ = exec.Command("sh", "-c", "iptables -w -D "+strings.TrimPrefix(line, "-A ")).Run()
				}
			}
		}
	})

	// The outside: a namespace of the test's own with 10.231.250.2, joined
	// to the host by a veth (10.231.250.1), and a listener in it.
	outNS, outHost := "cmt"+tag, "cmto"+tag
	outsideNamespace(t, outNS, outHost, "10.231.250.1", "10.231.250.2")
	serveIn(t, outNS, "10.231.250.2:7171")
	loopback, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	serveIn(t, "", loopback)
	_, loopPort, _ := net.SplitHostPort(loopback)
	// A host service on every address answers at the bridge's .1 but for
	// the firewall rules: the subnet's nodes must not reach it.
	anyPortN, err := freeport.One()
	if err != nil {
		t.Fatal(err)
	}
	anyPort := strconv.Itoa(anyPortN)
	serveIn(t, "", "0.0.0.0:"+anyPort)

	probe := filepath.Join(t.TempDir(), "probe.py")
	if err := os.WriteFile(probe, []byte(netProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	py := "/usr/bin/python3 " + probe

	s := startServer(t)
	dataDir = s.dataDir
	ctx := context.Background()
	mk := s.createNetCompute
	mk("open", "", 1, true)
	mk("suba", subnetA, 2, false)
	mk("subb", subnetB, 1, false)
	mk("priv", "", 1, false) // no public IP, no subnet: a network of the cluster's own
	priv, err := s.c.GetCompute(ctx, "priv")
	if err != nil {
		t.Fatal(err)
	}
	privDesc := priv.Aml().NetworkIsolation
	privBridge := ""
	if i := strings.Index(privDesc, "bridge cmb"); i >= 0 {
		privBridge = strings.Fields(privDesc[i:])[1]
		bridges = append(bridges, privBridge)
	} else {
		t.Errorf("networkIsolation of priv = %q, want a bridge of its own", privDesc)
	}
	// A subnet with a public IP left at Azure's default, as seed documents
	// write it (vnet_name, subnet_name, nothing about public IPs).
	c := api.Compute{Name: "subpub"}
	c.Properties.ComputeType = api.ComputeTypeAml
	one, zero := int32(1), int32(0)
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT5S"}
	c.Aml().Subnet = &api.ResourceRef{ID: subnetA}
	_, resp, err := s.c.PutCompute(ctx, c)
	if err != nil {
		t.Fatalf("subnet with a public IP (the default): %v", err)
	}
	if err := s.c.Wait(ctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	pub, err := s.c.GetCompute(ctx, "subpub")
	if err != nil || !strings.Contains(pub.Aml().NetworkIsolation, planA.Bridge) || !strings.Contains(pub.Aml().NetworkIsolation, "route out through NAT") {
		t.Errorf("networkIsolation of subpub = %q (%v), want bridge %s with a route out", pub.Aml().NetworkIsolation, err, planA.Bridge)
	}
	got, err := s.c.GetCompute(ctx, "suba")
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Aml().NetworkIsolation; !strings.Contains(d, planA.Bridge) || !strings.Contains(d, planA.CIDR()) {
		t.Errorf("networkIsolation of suba = %q, want its bridge %s and range %s", d, planA.Bridge, planA.CIDR())
	}

	s.submit("open-out", "open", py+" connect 10.231.250.2 7171 && "+py+" connect 127.0.0.1 "+loopPort)
	s.submitJob(distributedJob("a-pair", "suba", py+" pair 7070; "+py+" connect 10.231.250.2 7171; "+py+" connect 127.0.0.1 "+loopPort+"; "+py+" connect "+planA.HostIP()+" "+anyPort+"; exit 0", 2, "", 0))
	s.submit("b-out", "subb", py+" connect 10.231.250.2 7171")
	// The node with a public IP reaches the outside, as the host (NAT), and
	// still neither the host's services nor its loopback.
	s.submit("pub-out", "subpub", py+" connect 10.231.250.2 7171 && ("+py+" connect 127.0.0.1 "+loopPort+"; "+py+" connect "+planA.HostIP()+" "+anyPort+"; exit 0)")
	s.submit("priv-out", "priv", py+" connect 10.231.250.2 7171")

	s.waitJob("open-out", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("open-out"); !strings.Contains(l, "CONNECTED 10.231.250.2 outside") || !strings.Contains(l, "CONNECTED 127.0.0.1 outside") {
		t.Errorf("the job without isolation should reach the outside listener and the host's loopback; log:\n%s", l)
	}
	s.waitJob("a-pair", api.JobCompleted, 3*time.Minute)
	r0, r1 := s.rankLog("a-pair", 0), s.rankLog("a-pair", 1)
	if !strings.Contains(r0, "SERVED") || !strings.Contains(r1, "CONNECTED") || !strings.Contains(r1, "hello-from-rank-0") {
		t.Errorf("rank 1 should reach rank 0 in subnet a; rank 0:\n%s\nrank 1:\n%s", r0, r1)
	}
	for i, l := range []string{r0, r1} {
		if !strings.Contains(l, "UNREACHABLE 10.231.250.2") || strings.Contains(l, "CONNECTED 10.231.250.2") || strings.Contains(l, "CONNECTED 127.0.0.1") ||
			!strings.Contains(l, "UNREACHABLE "+planA.HostIP()+" timed out") {
			t.Errorf("rank %d of subnet a should reach neither the outside, the host's loopback nor a host service at the bridge's address; log:\n%s", i, l)
		}
		if !strings.Contains(l, "ips ['"+strings.TrimSuffix(planA.CIDR(), "0/24")) {
			t.Errorf("rank %d: node addresses not in %s; log:\n%s", i, planA.CIDR(), l)
		}
	}
	j := s.waitJob("b-out", api.JobFailed, 3*time.Minute)
	if l := s.jobLog("b-out"); !strings.Contains(l, "UNREACHABLE 10.231.250.2") {
		t.Errorf("the job of subnet b should fail to reach the outside (%s); log:\n%s", j.Properties.StatusMessage, l)
	}

	s.waitJob("pub-out", api.JobCompleted, 3*time.Minute)
	if l := s.jobLog("pub-out"); !strings.Contains(l, "CONNECTED 10.231.250.2 outside 10.231.250.1") || strings.Contains(l, "CONNECTED 127.0.0.1") ||
		!strings.Contains(l, "UNREACHABLE "+planA.HostIP()+" timed out") {
		t.Errorf("the node of subnet a with a public IP should reach the outside listener from the host's address (NAT), and not the host's loopback or services; log:\n%s", l)
	}

	t.Logf("open-out:\n%s\na-pair rank 0:\n%s\nrank 1:\n%s\nb-out:\n%s\npub-out:\n%s", s.jobLog("open-out"), r0, r1, s.jobLog("b-out"), s.jobLog("pub-out"))
	s.waitJob("priv-out", api.JobFailed, 3*time.Minute)
	if l := s.jobLog("priv-out"); !strings.Contains(l, "UNREACHABLE 10.231.250.2") {
		t.Errorf("the job of a cluster without public IPs should fail to reach the outside; log:\n%s", l)
	}
	// Subnet a's nodes are idle now (for 5 s): b cannot reach them.
	nodesA, err := s.c.ListNodes(ctx, "suba")
	if err != nil || len(nodesA) == 0 {
		t.Fatalf("nodes of suba: %v %v", nodesA, err)
	}
	var nsNames []string
	ipA := ""
	for _, n := range nodesA {
		nsNames = append(nsNames, local.NamespaceName(n.NodeID))
		if ipA == "" && strings.HasPrefix(n.PrivateIPAddress, strings.TrimSuffix(planA.CIDR(), "0/24")) {
			ipA = n.PrivateIPAddress
		}
	}
	nodesB, _ := s.c.ListNodes(ctx, "subb")
	nodesP, _ := s.c.ListNodes(ctx, "priv")
	nodesPub, _ := s.c.ListNodes(ctx, "subpub")
	for _, n := range append(append(nodesB, nodesP...), nodesPub...) {
		nsNames = append(nsNames, local.NamespaceName(n.NodeID))
	}
	if list := netnsList(); !strings.Contains(list, nsNames[0]) {
		t.Errorf("namespace %s of a node of suba not in ip netns list:\n%s", nsNames[0], list)
	}
	if ipA == "" {
		t.Fatalf("no node of suba has an address in %s: %+v", planA.CIDR(), nodesA)
	}
	s.submit("b-to-a", "subb", py+" connect "+ipA+" 7070")
	s.waitJob("b-to-a", api.JobFailed, 3*time.Minute)
	if l := s.jobLog("b-to-a"); !strings.Contains(l, "UNREACHABLE "+ipA) {
		t.Errorf("a node of subnet b should not reach %s of subnet a; log:\n%s", ipA, l)
	}

	t.Logf("b-to-a:\n%s", s.jobLog("b-to-a"))
	// Scale to zero: no namespace, bridge or rule is left.
	waitFor(t, "the clusters to scale to zero", 2*time.Minute, func() bool {
		for _, name := range []string{"open", "suba", "subb", "priv", "subpub"} {
			if ns, err := s.c.ListNodes(ctx, name); err != nil || len(ns) > 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, "the namespaces to go", 30*time.Second, func() bool {
		list := netnsList()
		for _, ns := range nsNames {
			if strings.Contains(list, ns) {
				return false
			}
		}
		return true
	})
	for _, b := range bridges {
		if _, err := os.Stat("/sys/class/net/" + b); err == nil {
			t.Errorf("bridge %s is left after its last node", b)
		}
		if out, _ := exec.Command("iptables", "-w", "-S").Output(); strings.Contains(string(out), b) {
			t.Errorf("iptables rules of bridge %s are left:\n%s", b, out)
		}
	}
	rangeA := strings.TrimSuffix(planA.CIDR(), "0/24")
	for _, table := range []string{"filter", "nat"} {
		if out, _ := exec.Command("iptables", "-w", "-t", table, "-S").Output(); strings.Contains(string(out), rangeA) {
			t.Errorf("iptables %s rules of the public node's address are left:\n%s", table, out)
		}
	}
}
